// The decode-side kernels: dot_kv_rows (fused NVFP4 key decoding) against read_kv_rows + a plain double reference
// and bit for bit against the unfused route; linear_many against linear()/linear_q8() on each task; the MXFP8 GEMM's
// two exact E4M3 decodings (the integer one and the F16C one for large block scales) giving identical results.
#include "core/parallel.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/gemm_nt.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/linear.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace msa {
namespace {

class DotKvRowsTest : public ::testing::TestWithParam<std::tuple<KvCacheDtype, bool>> {
protected:
    test::ScopedCpuFeatures mode_{std::get<1>(GetParam())};
};

TEST_P(DotKvRowsTest, MatchesReadThenMultiplyExactly) {
    const KvCacheDtype dtype = std::get<0>(GetParam());
    test::TestKvLayer layer(dtype, 2, 128, 128, 2);
    const PagedRows rows = layer.view.k(1);
    for (int slot = 0; slot < 128; ++slot) {
        const auto x = test::random_floats(128, 300 + static_cast<std::uint32_t>(slot), -4.0f, 4.0f);
        cpu::write_kv_row(rows, 1, slot, x.data());
    }
    std::vector<float> scratch, keys(128 * 128);
    for (const auto mode : {cpu::KvRead::exact, cpu::KvRead::e4m3}) {
        for (const int count : {128, 77, 1}) {
            for (const std::int64_t arows : {1, 2, 3, 4, 5, 8, 9, 20}) {
                const auto a = test::random_floats(static_cast<std::size_t>(arows * 128), 17 + static_cast<std::uint32_t>(arows));
                const std::int64_t ldo = 130;
                std::vector<float> got(static_cast<std::size_t>(arows * ldo), -7.0f), want(got.size(), -7.0f);
                cpu::dot_kv_rows(rows, 1, count, mode, a.data(), arows, got.data(), ldo, scratch);
                // The unfused route: decode the rows, then the FP32 GEMM.
                cpu::read_kv_rows(rows, 1, count, mode, keys.data());
                cpu::gemm_nt_f32(a.data(), 128, keys.data(), 128, want.data(), ldo, arows, count, 128);
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                    << "count " << count << " arows " << arows << " mode " << static_cast<int>(mode);
                // And against a double reference built on the formats library (exact mode).
                if (mode != cpu::KvRead::exact) continue;
                for (int t = 0; t < count; ++t) {
                    const std::vector<float> key = test::stored_row(rows, 1, t);
                    for (std::int64_t i = 0; i < arows; ++i) {
                        double s = 0, mag = 0;
                        for (int d = 0; d < 128; ++d) {
                            s += static_cast<double>(a[static_cast<std::size_t>(i * 128 + d)]) * key[static_cast<std::size_t>(d)];
                            mag += std::fabs(static_cast<double>(a[static_cast<std::size_t>(i * 128 + d)]) * key[static_cast<std::size_t>(d)]);
                        }
                        ASSERT_NEAR(got[static_cast<std::size_t>(i * ldo + t)], s, 1e-6 * mag + 1e-30);
                    }
                }
                // Columns past `count` are untouched.
                for (std::int64_t i = 0; i < arows; ++i)
                    for (std::int64_t t = count; t < ldo; ++t) ASSERT_EQ(got[static_cast<std::size_t>(i * ldo + t)], -7.0f);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DotKvRowsTest,
                         ::testing::Combine(::testing::Values(KvCacheDtype::NVFP4, KvCacheDtype::FP8, KvCacheDtype::BF16),
                                            ::testing::Bool()));

class LinearManyTest : public ::testing::TestWithParam<bool> {
protected:
    test::ScopedCpuFeatures mode_{GetParam()};
};

TEST_P(LinearManyTest, EqualsOneCallPerTask) {
    const auto bf16 = test::make_weight(LinearFormat::bf16, 70, 256, 1);
    const auto mx = test::make_weight(LinearFormat::mxfp8, 300, 512, 2);
    const auto fp4a = test::make_weight(LinearFormat::nvfp4, 129, 512, 3);
    const auto fp4b = test::make_weight(LinearFormat::nvfp4, 512, 256, 4);
    const auto x256 = test::random_floats(3 * 256, 5), x512 = test::random_floats(3 * 512, 6);
    cpu::Q8Rows xq;
    cpu::quantize_rows_w4a4(x512.data(), 2, 512, cpu::W4a4Input::fc1, xq);
    const WeightView vb = bf16.view(), vm = mx.view(), va = fp4a.view(), vf = fp4b.view();
    struct Expect {
        std::vector<float> y, want;
    };
    for (const int threads : {1, 3}) {
        set_num_threads(threads);
        std::vector<Expect> e(6);
        std::vector<cpu::LinearTask> tasks = {
            {&vb, x256.data(), nullptr, 3, nullptr, cpu::ActivationMode::exact},
            {&vm, x512.data(), nullptr, 2, nullptr, cpu::ActivationMode::int8},
            {&va, x512.data(), nullptr, 3, nullptr, cpu::ActivationMode::int8},
            {&va, nullptr, &xq, 2, nullptr, cpu::ActivationMode::exact},
            {&vf, x256.data(), nullptr, 1, nullptr, cpu::ActivationMode::exact},
            {&vf, x256.data(), nullptr, 0, nullptr, cpu::ActivationMode::exact},  // empty task
        };
        for (std::size_t t = 0; t < tasks.size(); ++t) {
            const auto n = static_cast<std::size_t>(std::max<std::int64_t>(1, tasks[t].m) * tasks[t].w->rows);
            e[t].y.assign(n, 99.0f);
            e[t].want.assign(n, 99.0f);
            tasks[t].y = e[t].y.data();
        }
        cpu::linear_many(tasks);
        for (std::size_t t = 0; t < tasks.size(); ++t) {
            const cpu::LinearTask& task = tasks[t];
            if (task.xq != nullptr) {
                cpu::linear_q8(*task.w, *task.xq, e[t].want.data());
            } else {
                cpu::linear(*task.w, task.x, task.m, e[t].want.data(), task.mode);
            }
            ASSERT_EQ(0, std::memcmp(e[t].y.data(), e[t].want.data(), e[t].y.size() * sizeof(float)))
                << "task " << t << " threads " << threads;
        }
    }
    set_num_threads(1);
}

INSTANTIATE_TEST_SUITE_P(Modes, LinearManyTest, ::testing::Bool());

// Scales above 134 (blocks beyond 2^7 * 448) send a GEMM job to the F16C decoding; rows that do not have such a
// scale must come out bit-identical to the integer decoding's results, and large rows stay exact.
TEST(Mxfp8Decodings, LargeScalesTakeTheF16cRouteWithIdenticalResults) {
    test::ScopedCpuFeatures simd{true};
    set_num_threads(1);
    auto w = test::make_weight(LinearFormat::mxfp8, 24, 256, 21);
    const auto x = test::random_floats(2 * 256, 22);
    for (std::int64_t m : {1, 2}) {
        std::vector<float> before(static_cast<std::size_t>(m * 24)), after(before.size());
        cpu::linear(w.view(), x.data(), m, before.data());
        auto big = w;
        big.scales[5 * 8 + 3] = 140;  // row 5, block 3: its weights are now 2^k times larger
        for (int c = 0; c < 32; ++c) big.dense[static_cast<std::size_t>(5 * 256 + 3 * 32 + c)] *= std::ldexp(1.0f, 140 - w.scales[5 * 8 + 3]);
        cpu::linear(big.view(), x.data(), m, after.data());
        for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t n = 0; n < 24; ++n) {
                const std::size_t at = static_cast<std::size_t>(i * 24 + n);
                if (n != 5) {
                    ASSERT_EQ(std::memcmp(&before[at], &after[at], 4), 0) << "row " << n;
                    continue;
                }
                double s = 0, mag = 0;
                for (int k = 0; k < 256; ++k) {
                    const double p = static_cast<double>(x[static_cast<std::size_t>(i * 256 + k)]) * big.dense[static_cast<std::size_t>(n * 256 + k)];
                    s += p;
                    mag += std::fabs(p);
                }
                ASSERT_TRUE(std::isfinite(after[at]));
                ASSERT_NEAR(after[at], s, 2e-6 * mag);
            }
        }
    }
}

}  // namespace
}  // namespace msa
