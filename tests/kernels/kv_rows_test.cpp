// KV rows: what write_kv_row stores equals the formats library's quantisers, and read_kv_rows returns the exact
// values (or their single E4M3 rounding) on both the SIMD and the scalar path.
#include "core/cpu_features.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/kv_rows.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <cstring>

namespace msa {
namespace {

class KvRowsTest : public ::testing::TestWithParam<KvCacheDtype> {};

TEST_P(KvRowsTest, WriteThenReadRoundTrips) {
    const KvCacheDtype dtype = GetParam();
    test::TestKvLayer layer(dtype, 2, 128, 128, 3);
    const PagedRows rows = layer.view.v(1);
    std::vector<std::vector<float>> written;
    for (int slot = 0; slot < 20; ++slot) {
        auto x = test::random_floats(128, 40 + slot, -5.0f, 5.0f);
        if (slot == 3) x.assign(128, 0.0f);  // amax floor of formats.md step 1
        cpu::write_kv_row(rows, 2, slot, x.data());
        written.push_back(x);
    }
    // Stored bytes equal the formats library's encoders.
    for (int slot = 0; slot < 20; ++slot) {
        const auto& x = written[static_cast<std::size_t>(slot)];
        if (dtype == KvCacheDtype::NVFP4) {
            std::uint8_t packed[64], scales[8];
            nvfp4_quantize(x.data(), 128, packed, scales);
            EXPECT_EQ(0, std::memcmp(packed, rows.row_data(2, slot), 64));
            EXPECT_EQ(0, std::memcmp(scales, rows.row_scales(2, slot), 8));
        } else if (dtype == KvCacheDtype::FP8) {
            for (int i = 0; i < 128; ++i) EXPECT_EQ(rows.row_data(2, slot)[i], float_to_e4m3(x[i]));
        } else {
            for (int i = 0; i < 128; ++i) {
                std::uint16_t b;
                std::memcpy(&b, rows.row_data(2, slot) + 2 * i, 2);
                EXPECT_EQ(b, float_to_bf16(x[i]));
            }
        }
    }
    const CpuFeatures saved = cpu_features();
    for (bool simd : {true, false}) {
        if (!simd) set_cpu_features_for_testing(CpuFeatures{});
        std::vector<float> exact(20 * 128), rounded(20 * 128);
        cpu::read_kv_rows(rows, 2, 20, cpu::KvRead::exact, exact.data());
        cpu::read_kv_rows(rows, 2, 20, cpu::KvRead::e4m3, rounded.data());
        set_cpu_features_for_testing(saved);
        for (int slot = 0; slot < 20; ++slot) {
            const auto ref = test::stored_row(rows, 2, slot);
            for (int i = 0; i < 128; ++i) {
                ASSERT_EQ(exact[slot * 128 + i], ref[i]) << "slot " << slot << " i " << i << " simd " << simd;
                ASSERT_EQ(rounded[slot * 128 + i], e4m3_to_float(float_to_e4m3(ref[i])))
                    << "slot " << slot << " i " << i << " simd " << simd;
            }
        }
    }
}

TEST_P(KvRowsTest, PagesAndHeadsDoNotOverlap) {
    const KvCacheDtype dtype = GetParam();
    test::TestKvLayer layer(dtype, 2, 128, 128, 4);
    // Fill rows of every head and page, then check each reads back its own value.
    const PagedRows k0 = layer.view.k(0), k1 = layer.view.k(1), v0 = layer.view.v(0), v1 = layer.view.v(1),
                    ik = layer.view.index_k();
    const PagedRows* all[] = {&k0, &k1, &v0, &v1, &ik};
    for (int p = 0; p < 4; ++p)
        for (int h = 0; h < 5; ++h)
            for (int t = 0; t < 128; t += 37) {
                auto x = test::random_floats(128, static_cast<std::uint32_t>(p * 1000 + h * 200 + t));
                cpu::write_kv_row(*all[h], p, t, x.data());
            }
    for (int p = 0; p < 4; ++p)
        for (int h = 0; h < 5; ++h)
            for (int t = 0; t < 128; t += 37) {
                auto x = test::random_floats(128, static_cast<std::uint32_t>(p * 1000 + h * 200 + t));
                std::vector<float> back(128);
                cpu::read_kv_rows(*all[h], p, 1, cpu::KvRead::exact, back.data());
                if (t == 0) {
                    const auto ref = test::stored_row(*all[h], p, 0);
                    EXPECT_EQ(back, ref);
                }
                // The quantised value stays within one NVFP4 step of the input.
                const auto stored = test::stored_row(*all[h], p, t);
                for (int i = 0; i < 128; ++i) ASSERT_NEAR(stored[i], x[i], 0.35f) << p << " " << h << " " << t;
            }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvRowsTest, ::testing::Values(KvCacheDtype::NVFP4, KvCacheDtype::FP8, KvCacheDtype::BF16),
                         [](const ::testing::TestParamInfo<KvCacheDtype>& param_info) {
                             return std::string(kv_cache_dtype_name(param_info.param));
                         });

}  // namespace
}  // namespace msa
