#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/parallel.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
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

TEST(MappedFile, HugePageCopyHoldsTheFileBytes) {
    // 5 MiB + 123 bytes: more than the automatic choice's 4 MiB, and not a whole number of huge pages.
    const auto path = std::filesystem::temp_directory_path() / "msa_core_test_huge_pages.bin";
    std::string bytes((std::size_t{5} << 20) + 123, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
    {
        std::ofstream out(path, std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    MappedFile mapped(path.string(), MappedFile::Load::map);
    EXPECT_FALSE(mapped.in_huge_pages());
    MappedFile copied(path.string(), MappedFile::Load::huge_pages);
    EXPECT_TRUE(copied.in_huge_pages());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copied.data()) % (std::uintptr_t{2} << 20), 0u);
    for (const MappedFile* f : {&mapped, &copied}) {
        ASSERT_EQ(f->size(), bytes.size());
        EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
    }
    MappedFile moved = std::move(copied);
    EXPECT_TRUE(moved.in_huge_pages());
    EXPECT_FALSE(copied.in_huge_pages());
    EXPECT_EQ(copied.data(), nullptr);
    EXPECT_EQ(std::memcmp(moved.data(), bytes.data(), bytes.size()), 0);
    moved = MappedFile(path.string(), MappedFile::Load::map);
    EXPECT_FALSE(moved.in_huge_pages());
    EXPECT_EQ(std::memcmp(moved.data(), bytes.data(), bytes.size()), 0);
    // The automatic choice maps when told to, and always maps small files.
    ::setenv("MSA_WEIGHTS_HUGE_PAGES", "0", 1);
    EXPECT_FALSE(MappedFile(path.string(), MappedFile::Load::automatic).in_huge_pages());
    ::unsetenv("MSA_WEIGHTS_HUGE_PAGES");
    std::filesystem::resize_file(path, 1000);
    EXPECT_FALSE(MappedFile(path.string()).in_huge_pages());
    EXPECT_FALSE(MappedFile(path.string(), MappedFile::Load::automatic).in_huge_pages());
    EXPECT_TRUE(MappedFile(path.string(), MappedFile::Load::huge_pages).in_huge_pages());
    std::filesystem::remove(path);
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

TEST(ParallelFor, SameRangesAsAStaticSplit) {
    // Kernels rely on the split being deterministic (bit-identical results whatever thread runs a range): four
    // ranges per thread at most, none smaller than the grain, boundaries n * i / ranges.
    auto ranges_of = [](std::size_t n, std::size_t grain) {
        std::mutex m;
        std::vector<std::pair<std::size_t, std::size_t>> seen;
        parallel_for(n, grain, [&](std::size_t begin, std::size_t end) {
            const std::lock_guard<std::mutex> lock(m);
            seen.emplace_back(begin, end);
        });
        std::sort(seen.begin(), seen.end());
        return seen;
    };
    using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;
    set_num_threads(2);
    EXPECT_EQ(ranges_of(20, 1), (Ranges{{0, 2}, {2, 5}, {5, 7}, {7, 10}, {10, 12}, {12, 15}, {15, 17}, {17, 20}}));
    EXPECT_EQ(ranges_of(10, 4), (Ranges{{0, 3}, {3, 6}, {6, 10}}));  // ceil(10 / 4) = 3 ranges
    set_num_threads(1);
    EXPECT_EQ(ranges_of(20, 1), (Ranges{{0, 20}}));
}

TEST(ParallelFor, NestedLoopsRunInTheCallingThread) {
    set_num_threads(3);
    std::atomic<long> total{0};
    parallel_for(6, 1, [&](std::size_t begin, std::size_t end) {
        const auto outer = std::this_thread::get_id();
        for (std::size_t i = begin; i < end; ++i) {
            parallel_for(50, 1, [&](std::size_t b, std::size_t e) {
                EXPECT_EQ(std::this_thread::get_id(), outer);
                total += static_cast<long>(e - b);
            });
        }
    });
    EXPECT_EQ(total.load(), 300);
}

TEST(ParallelFor, ProfileCountsTopLevelLoopsPerCallSite) {
    set_num_threads(3);
    set_parallel_profiling(true);
    reset_parallel_stats();
    auto sum_into = [](std::atomic<long>& total) {
        return [&total](std::size_t b, std::size_t e) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            total += static_cast<long>(e - b);
        };
    };
    std::atomic<long> total{0};
    for (int i = 0; i < 3; ++i) parallel_for(30, 1, sum_into(total));  // site A, three loops
    parallel_for(30, 1, [&](std::size_t b, std::size_t e) {            // site B, one loop with nested ones
        for (std::size_t i = b; i < e; ++i) parallel_for(2, 1, [&](std::size_t, std::size_t) {});
        total += static_cast<long>(e - b);
    });
    parallel_for(1, 1, sum_into(total));  // one range: inline, counted, not timed
    const ParallelStats st = parallel_stats();
    set_parallel_profiling(false);
    EXPECT_EQ(total.load(), 4 * 30 + 1);
    EXPECT_EQ(st.loops, 5u);  // the 30 nested loops are not counted
    ASSERT_EQ(st.sites.size(), 2u);
    EXPECT_EQ(st.sites[0].loops, 3u);
    EXPECT_EQ(st.sites[1].loops, 1u);
    EXPECT_NE(st.sites[0].site, st.sites[1].site);
    EXPECT_NE(st.sites[0].site.find("core_test.cpp:"), std::string::npos) << st.sites[0].site;
    // Each range of site A's loops sleeps 200 us, so each of its loops lasted at least that.
    EXPECT_GE(st.sites[0].seconds, 3 * 200e-6);
    EXPECT_NEAR(st.loop_seconds, st.sites[0].seconds + st.sites[1].seconds, 1e-9);
    reset_parallel_stats();
    EXPECT_EQ(parallel_stats().loops, 0u);
    EXPECT_TRUE(parallel_stats().sites.empty());
}

TEST(ParallelFor, WorkersSleepAfterTheirSpinTime) {
    const int saved = worker_spin_us();
    set_num_threads(3);
    set_worker_spin_us(0);
    reset_parallel_stats();
    // Every worker, asleep or spinning before, takes part in (or is woken for) this loop, and then spins again.
    parallel_for(30, 1, [](std::size_t, std::size_t) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // far past a zero spin: the workers sleep
    const std::uint64_t sleeps = parallel_stats().worker_sleeps;
    set_worker_spin_us(saved);
    EXPECT_EQ(worker_spin_us(), saved);
    EXPECT_GE(sleeps, 1u);
    // Sleeping workers are woken by the next loop, which still covers every index.
    std::atomic<long> total{0};
    parallel_for(1000, 1, [&](std::size_t b, std::size_t e) { total += static_cast<long>(e - b); });
    EXPECT_EQ(total.load(), 1000);
}

// Run twice by ctest: as core_test's own entry (MSA_PIN_THREADS unset: no thread is bound) and as
// ParallelFor.PinnedThreads (MSA_PIN_THREADS=1: every pool thread bound to one CPU, distinct ones while there are
// enough). Each is a process of its own, so the pool starts in this test with the process's CPU set.
TEST(ParallelFor, ThreadsArePinnedOnlyWhenAsked) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
    const int cpus = CPU_COUNT(&allowed);
    const int saved = num_threads();
    set_num_threads(std::max(2, std::min(4, cpus)));
    std::mutex m;
    std::vector<std::pair<std::thread::id, cpu_set_t>> seen;
    // Ranges slow enough (2 ms each) that every thread takes some.
    parallel_for(16, 1, [&](std::size_t, std::size_t) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
        while (std::chrono::steady_clock::now() < until) {
        }
        const std::lock_guard<std::mutex> lock(m);
        if (std::none_of(seen.begin(), seen.end(), [](const auto& s) { return s.first == std::this_thread::get_id(); }))
            seen.emplace_back(std::this_thread::get_id(), mine);
    });
    set_num_threads(saved);
    ASSERT_GE(seen.size(), 2u) << "the loop should have run on at least two threads";
    const char* flag = std::getenv("MSA_PIN_THREADS");
    ASSERT_EQ(threads_pinned(), flag != nullptr && std::string(flag) != "0");
    for (std::size_t i = 0; i < seen.size(); ++i) {
        if (!threads_pinned()) {
            EXPECT_TRUE(CPU_EQUAL(&seen[i].second, &allowed)) << "thread " << i << " was bound without being asked";
            continue;
        }
        ASSERT_EQ(CPU_COUNT(&seen[i].second), 1) << "thread " << i << " is not bound to one CPU";
        cpu_set_t both;
        CPU_AND(&both, &seen[i].second, &allowed);
        EXPECT_EQ(CPU_COUNT(&both), 1) << "thread " << i << " is bound outside the process's CPUs";
        for (std::size_t j = 0; j < i && static_cast<int>(seen.size()) <= cpus; ++j)
            EXPECT_FALSE(CPU_EQUAL(&seen[i].second, &seen[j].second))
                << "threads " << j << " and " << i << " share a CPU";
    }
}

TEST(ParallelFor, AnExceptionReachesTheCallerAfterEveryRangeEnded) {
    set_num_threads(3);
    std::atomic<int> finished{0};
    EXPECT_THROW(parallel_for(3, 1,
                              [&](std::size_t begin, std::size_t) {
                                  if (begin == 1) throw std::runtime_error("range 1 failed");
                                  std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                  finished++;
                              }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
    // The pool still works afterwards.
    std::atomic<int> count{0};
    parallel_for(100, 1, [&](std::size_t b, std::size_t e) { count += static_cast<int>(e - b); });
    EXPECT_EQ(count.load(), 100);
}

TEST(ParallelFor, ManyShortLoopsFromSeveralThreads) {
    // Loops back to back (decode runs dozens per token) and from several callers at once: every index once.
    set_num_threads(3);
    std::vector<std::thread> callers;
    std::atomic<int> failures{0};
    for (int c = 0; c < 3; ++c) {
        callers.emplace_back([&, c] {
            for (int round = 0; round < 300; ++round) {
                const std::size_t n = static_cast<std::size_t>(1 + (round * 7 + c) % 40);
                std::vector<std::atomic<int>> hits(n);
                parallel_for(n, 1, [&](std::size_t b, std::size_t e) {
                    for (std::size_t i = b; i < e; ++i) hits[i]++;
                });
                for (std::size_t i = 0; i < n; ++i) {
                    if (hits[i].load() != 1) failures++;
                }
            }
        });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(failures.load(), 0);
}

// MSA_STRESS_SCALE=k runs k times the rounds (for hunting races by hand).
int rounds_scale() {
    const char* v = std::getenv("MSA_STRESS_SCALE");
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 1;
}

TEST(ParallelFor, AlternatingLoopSizesRunEachRangeOnceAndNeverHang) {
    // Back-to-back loops whose range counts alternate between small and large, many workers: a worker that finished
    // the last range of one loop must not claim a range of the next one with the old loop's ticket (that ran a
    // range twice, with a stale function, and could leave the caller waiting for a count it had passed).
    set_num_threads(16);
    std::atomic<bool> finished{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 1200 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (!finished.load()) {
            std::fprintf(stderr, "parallel_for hung (no progress in 120 s)\n");
            std::_Exit(1);
        }
    });
    int failures = 0;
    for (int round = 0; round < 200000 * rounds_scale() && failures == 0; ++round) {
        const std::size_t n = round % 2 == 0 ? 2 : 16;
        // A fresh vector per loop: a stale call into the previous loop's function would touch freed memory.
        auto hits = std::make_unique<std::vector<std::atomic<int>>>(n);
        parallel_for(n, 1, [&hits](std::size_t b, std::size_t e) {
            for (std::size_t i = b; i < e; ++i) (*hits)[i]++;
        });
        for (std::size_t i = 0; i < n; ++i) {
            if ((*hits)[i].load() != 1) {
                ++failures;
                ADD_FAILURE() << "round " << round << " index " << i << " ran " << (*hits)[i].load() << " times";
            }
        }
    }
    finished = true;
    watchdog.join();
    EXPECT_EQ(failures, 0);
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
