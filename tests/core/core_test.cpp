#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

namespace msa {
namespace {

TEST(Error, CheckThrowsFormattedMessage) {
    try {
        MSA_CHECK(1 + 1 == 3, "tensor '{}' has {} dims", "w", 2);
        FAIL() << "MSA_CHECK did not throw";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "tensor 'w' has 2 dims");
    }
    EXPECT_NO_THROW(MSA_CHECK(true, "never"));
}

TEST(LogLevel, ParsesNamesAndRejectsOthers) {
    EXPECT_EQ(parse_log_level("debug"), LogLevel::debug);
    EXPECT_EQ(parse_log_level("warning"), LogLevel::warn);
    EXPECT_THROW(parse_log_level("loud"), Error);
}

TEST(MappedFile, MapsWholeFileAndReportsMissingFile) {
    const auto path = std::filesystem::temp_directory_path() / "msa_core_test_mapped.bin";
    {
        std::ofstream out(path, std::ios::binary);
        out << "hello mapped world";
    }
    MappedFile file(path.string());
    ASSERT_EQ(file.size(), 18u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), file.size()), "hello mapped world");
    MappedFile moved = std::move(file);
    EXPECT_EQ(moved.size(), 18u);
    EXPECT_EQ(file.data(), nullptr);
    std::filesystem::remove(path);
    try {
        MappedFile missing("/nonexistent/dir/model.safetensors");
        FAIL() << "opening a missing file did not throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.safetensors"), std::string::npos);
    }
}

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        for (std::size_t n : {0u, 1u, 7u, 1000u}) {
            std::vector<std::atomic<int>> hits(n);
            parallel_for(n, 3, [&](std::size_t begin, std::size_t end) {
                ASSERT_LT(begin, end);
                for (std::size_t i = begin; i < end; ++i) hits[i]++;
            });
            for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        }
    }
}

TEST(CpuFeatures, OverrideForTesting) {
    const CpuFeatures saved = cpu_features();
    set_cpu_features_for_testing(CpuFeatures{});
    EXPECT_FALSE(cpu_features().avx2);
    set_cpu_features_for_testing(saved);
    EXPECT_EQ(cpu_features().avx2, saved.avx2);
}

}  // namespace
}  // namespace msa
