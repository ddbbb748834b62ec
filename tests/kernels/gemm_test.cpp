// linear() against a plain double-precision reference for every weight format and activation mode, plus the
// property that a row's result does not depend on which other rows are in the batch.
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "formats/nvfp4.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

namespace msa {
namespace {

using test::make_weight;
using test::random_floats;

// y[i][n] = sum_k x[i][k] * W[n][k] in double; also returns sum |x||w| per output for relative bounds.
void reference(const std::vector<float>& w, std::int64_t N, std::int64_t K, const std::vector<float>& x,
               std::int64_t m, std::vector<double>& y, std::vector<double>& mag) {
    y.assign(static_cast<std::size_t>(m * N), 0.0);
    mag.assign(static_cast<std::size_t>(m * N), 0.0);
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t n = 0; n < N; ++n) {
            double s = 0, a = 0;
            for (std::int64_t k = 0; k < K; ++k) {
                s += static_cast<double>(x[i * K + k]) * w[n * K + k];
                a += std::fabs(static_cast<double>(x[i * K + k]) * w[n * K + k]);
            }
            y[i * N + n] = s;
            mag[i * N + n] = a;
        }
}

struct Case {
    LinearFormat format;
    std::int64_t n, k;
};

class LinearTest : public ::testing::TestWithParam<std::tuple<Case, bool>> {
protected:
    test::ScopedCpuFeatures mode_{std::get<1>(GetParam())};
};

TEST_P(LinearTest, ExactModeMatchesDoubleReference) {
    const Case c = std::get<0>(GetParam());
    const auto w = make_weight(c.format, c.n, c.k, 11);
    for (std::int64_t m : {1, 3, 8, 13, 40}) {
        const auto x = random_floats(static_cast<std::size_t>(m * c.k), 100 + static_cast<std::uint32_t>(m));
        std::vector<float> y(static_cast<std::size_t>(m * c.n));
        cpu::linear(w.view(), x.data(), m, y.data());
        std::vector<double> ref, mag;
        reference(w.dense, c.n, c.k, x, m, ref, mag);
        for (std::size_t i = 0; i < y.size(); ++i) {
            ASSERT_NEAR(y[i], ref[i], 2e-6 * mag[i] + 1e-30) << "m=" << m << " index " << i;
        }
    }
}

TEST_P(LinearTest, RowsDoNotDependOnTheBatch) {
    const Case c = std::get<0>(GetParam());
    const auto w = make_weight(c.format, c.n, c.k, 12);
    const std::int64_t m = 21;
    const auto x = random_floats(static_cast<std::size_t>(m * c.k), 7);
    for (auto mode : {cpu::ActivationMode::exact, cpu::ActivationMode::int8}) {
        std::vector<float> all(static_cast<std::size_t>(m * c.n));
        cpu::linear(w.view(), x.data(), m, all.data(), mode);
        // Each row alone, then rows in groups of 5 (mixing the small-batch and panel routes).
        for (std::int64_t i = 0; i < m; ++i) {
            std::vector<float> one(static_cast<std::size_t>(c.n));
            cpu::linear(w.view(), x.data() + i * c.k, 1, one.data(), mode);
            ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * c.n, one.size() * 4)) << "row " << i;
        }
        for (std::int64_t i = 0; i + 5 <= m; i += 5) {
            std::vector<float> five(static_cast<std::size_t>(5 * c.n));
            cpu::linear(w.view(), x.data() + i * c.k, 5, five.data(), mode);
            ASSERT_EQ(0, std::memcmp(five.data(), all.data() + i * c.n, five.size() * 4)) << "rows from " << i;
        }
    }
}

TEST_P(LinearTest, Int8ModeIsCloseToExact) {
    const Case c = std::get<0>(GetParam());
    const auto w = make_weight(c.format, c.n, c.k, 13);
    const std::int64_t m = 6;
    const auto x = random_floats(static_cast<std::size_t>(m * c.k), 8);
    std::vector<float> y(static_cast<std::size_t>(m * c.n));
    cpu::linear(w.view(), x.data(), m, y.data(), cpu::ActivationMode::int8);
    std::vector<double> ref, mag;
    reference(w.dense, c.n, c.k, x, m, ref, mag);
    // int8 per 16 values: each product carries at most 1/254 of |x|max(group) * |w| of error.
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 0.02 * mag[i] + 1e-6) << i;
}

const Case kCases[] = {
    {LinearFormat::f32, 37, 72},   {LinearFormat::f32, 64, 256},  {LinearFormat::bf16, 29, 200},
    {LinearFormat::bf16, 96, 512}, {LinearFormat::f16, 17, 64},   {LinearFormat::mxfp8, 33, 96},
    {LinearFormat::mxfp8, 70, 1024}, {LinearFormat::nvfp4, 31, 48}, {LinearFormat::nvfp4, 66, 512},
    {LinearFormat::nvfp4, 40, 2048},
};

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, bool>>& info) {
    const Case c = std::get<0>(info.param);
    return std::string(linear_format_name(c.format)) + "_" + std::to_string(c.n) + "x" + std::to_string(c.k) +
           (std::get<1>(info.param) ? "_simd" : "_scalar");
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearTest, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         case_name);

// The AVX-512 small-batch kernels (BF16, MXFP8: two weight rows per register) give the AVX2 kernels' results bit for
// bit, for every tile shape, odd row counts and both MXFP8 block checks (codes, and the adopted weight's bitmap).
TEST(Linear, Avx512EqualsAvx2BitForBit) {
    if (!cpu_features().avx512) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, DQ, VL, VNNI)";
    CpuFeatures avx2_only = cpu_features();
    avx2_only.avx512 = false;
    std::uint32_t seed = 900;
    for (LinearFormat format : {LinearFormat::bf16, LinearFormat::mxfp8}) {
        for (std::int64_t n : {1, 2, 3, 8, 9, 19}) {
            for (std::int64_t k : {32, 96, 1024}) {
                auto w = make_weight(format, n, k, seed++);
                if (format == LinearFormat::mxfp8) {  // E4M3 subnormals in some rows' blocks: the F16C decoding
                    for (std::int64_t r = 0; r < n; r += 3)
                        w.data[static_cast<std::size_t>(r * k + (r * 37) % k)] = 0x81;
                }
                const auto flags = format == LinearFormat::mxfp8 ? cpu::mxfp8_exponent_zero_blocks(w.view())
                                                                 : std::vector<std::uint64_t>{};
                WeightView with_bitmap = w.view();
                with_bitmap.mxfp8_exponent_zero_blocks = flags.empty() ? nullptr : flags.data();
                for (std::int64_t m : {1, 2, 3, 4, 5, 8}) {
                    const auto x = random_floats(static_cast<std::size_t>(m * k), seed++);
                    for (const WeightView& v : {w.view(), with_bitmap}) {
                        std::vector<float> wide(static_cast<std::size_t>(m * n), -1.0f), narrow(wide.size(), -2.0f);
                        cpu::linear(v, x.data(), m, wide.data());
                        {
                            test::ScopedCpuFeatures only(avx2_only);
                            cpu::linear(v, x.data(), m, narrow.data());
                        }
                        ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
                            << linear_format_name(format) << " n " << n << " k " << k << " m " << m;
                    }
                }
            }
        }
    }
}

// linear_many() with on_task_done: each task's hook runs exactly once, after all its rows are written (the hook
// copies the output then), and the outputs are linear_many()'s without a hook; linear_rows() gives linear()'s rows.
TEST(LinearMany, TaskDoneHookSeesWholeOutputsAndChangesNothing) {
    const int saved = num_threads();
    std::uint32_t seed = 1200;
    std::vector<test::OwnedWeight> ws;
    for (LinearFormat f :
         {LinearFormat::f32, LinearFormat::bf16, LinearFormat::mxfp8, LinearFormat::nvfp4, LinearFormat::nvfp4})
        ws.push_back(make_weight(f, 300 + static_cast<std::int64_t>(ws.size()) * 70, 256, seed++));
    std::vector<WeightView> views;
    for (const auto& w : ws) views.push_back(w.view());
    for (const std::int64_t m : {1, 3}) {
        const auto x = random_floats(static_cast<std::size_t>(m * 256), seed++);
        cpu::Q8Rows xq;
        cpu::quantize_rows_w4a4(x.data(), m, 256, cpu::W4a4Input::fc1, xq);
        auto make_tasks = [&](std::vector<std::vector<float>>& ys) {
            std::vector<cpu::LinearTask> tasks;
            ys.assign(views.size(), {});
            for (std::size_t t = 0; t < views.size(); ++t) {
                ys[t].assign(static_cast<std::size_t>(m * views[t].rows), NAN);
                const bool q8 = t + 1 == views.size();  // the last one on pre-quantised W4A4 activations
                tasks.push_back({&views[t], q8 ? nullptr : x.data(), q8 ? &xq : nullptr, m, ys[t].data(),
                                 t == 3 ? ActivationMode::int8 : ActivationMode::exact});
            }
            return tasks;
        };
        std::vector<std::vector<float>> plain;
        set_num_threads(1);
        cpu::linear_many(make_tasks(plain));
        for (const int threads : {1, 2, 4}) {
            set_num_threads(threads);
            std::vector<std::vector<float>> hooked, seen(views.size());
            const auto tasks = make_tasks(hooked);
            std::vector<std::atomic<int>> calls(views.size());
            cpu::linear_many(tasks, [&](std::size_t t) {
                calls[t].fetch_add(1);
                seen[t] = hooked[t];  // the whole output, as the hook sees it
            });
            for (std::size_t t = 0; t < views.size(); ++t) {
                EXPECT_EQ(calls[t].load(), 1) << "task " << t << ", " << threads << " threads";
                EXPECT_EQ(0, std::memcmp(hooked[t].data(), plain[t].data(), plain[t].size() * 4)) << "task " << t;
                ASSERT_EQ(seen[t].size(), plain[t].size());
                EXPECT_EQ(0, std::memcmp(seen[t].data(), plain[t].data(), plain[t].size() * 4))
                    << "task " << t << " was not complete when its hook ran, " << threads << " threads";
            }
        }
        for (std::size_t t = 0; t + 2 < views.size(); ++t) {  // the float paths
            std::vector<float> whole(static_cast<std::size_t>(m * views[t].rows), NAN), rows(whole.size(), NAN);
            cpu::linear(views[t], x.data(), m, whole.data());
            const std::int64_t cut = views[t].rows / 3;
            cpu::linear_rows(views[t], x.data(), m, rows.data(), 0, cut);
            cpu::linear_rows(views[t], x.data(), m, rows.data(), cut, views[t].rows);
            EXPECT_EQ(0, std::memcmp(rows.data(), whole.data(), whole.size() * 4)) << "linear_rows, weight " << t;
        }
    }
    set_num_threads(saved);
}

// W4A4 (M3.1 experts): the integer path against a reference that quantises the activations itself with the
// formats library and computes in double.
TEST(LinearW4a4, MatchesQuantisedActivationReference) {
    const std::int64_t N = 24, K = 256, m = 5;
    const auto w = make_weight(LinearFormat::nvfp4, N, K, 21);
    auto x = random_floats(static_cast<std::size_t>(m * K), 22, -3.0f, 3.0f);
    for (auto input : {cpu::W4a4Input::fc1, cpu::W4a4Input::fc2}) {
        for (bool simd : {false, true}) {
            const CpuFeatures saved = cpu_features();
            if (!simd) set_cpu_features_for_testing(CpuFeatures{});
            cpu::Q8Rows xq;
            cpu::quantize_rows_w4a4(x.data(), m, K, input, xq);
            std::vector<float> y(static_cast<std::size_t>(m * N));
            cpu::linear_q8(w.view(), xq, y.data());
            set_cpu_features_for_testing(saved);
            for (std::int64_t i = 0; i < m; ++i) {
                float amax = 0;
                for (std::int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[i * K + k]));
                const float S = input == cpu::W4a4Input::fc1 ? 2688.0f / amax : 16.0f;
                std::vector<std::uint8_t> packed(K / 2), scales(K / 16);
                nvfp4_quantize_activation_row(x.data() + i * K, K, S, packed.data(), scales.data());
                std::vector<float> xd(K);
                nvfp4_dequantize(packed.data(), scales.data(), K, 1.0f, xd.data());
                for (std::int64_t n = 0; n < N; ++n) {
                    double s = 0, a = 0;
                    for (std::int64_t k = 0; k < K; ++k) {
                        s += static_cast<double>(xd[k]) * w.dense[n * K + k];
                        a += std::fabs(static_cast<double>(xd[k]) * w.dense[n * K + k]);
                    }
                    const double expect = input == cpu::W4a4Input::fc1 ? s * amax / 2688.0 : s / 16.0;
                    const double bound = (input == cpu::W4a4Input::fc1 ? a * amax / 2688.0 : a / 16.0) * 1e-6;
                    ASSERT_NEAR(y[i * N + n], expect, bound) << "row " << i << " col " << n << " simd " << simd;
                }
            }
        }
    }
}

TEST(LinearW4a4, ZeroRowGivesZeroOutput) {
    const auto w = make_weight(LinearFormat::nvfp4, 8, 64, 3);
    std::vector<float> x(64, 0.0f);
    cpu::Q8Rows xq;
    cpu::quantize_rows_w4a4(x.data(), 1, 64, cpu::W4a4Input::fc1, xq);
    std::vector<float> y(8, 1.0f);
    cpu::linear_q8(w.view(), xq, y.data());
    for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(Linear, RejectsMalformedWeights) {
    WeightView w;
    EXPECT_THROW(cpu::check_linear_weight(w, "layers.0.mlp.up_proj.weight"), Error);
    auto ok = make_weight(LinearFormat::nvfp4, 4, 32, 1);
    auto v = ok.view();
    EXPECT_NO_THROW(cpu::check_linear_weight(v, "x"));
    v.cols = 24;
    EXPECT_THROW(cpu::check_linear_weight(v, "x"), Error);
}

}  // namespace
}  // namespace msa
