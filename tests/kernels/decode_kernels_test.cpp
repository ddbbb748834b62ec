// The decode-side kernels: dot_kv_rows (fused NVFP4 key decoding) against read_kv_rows + a plain double reference
// and bit for bit against the unfused route; linear_many against linear()/linear_q8() on each task; the MXFP8 GEMM's
// two exact E4M3 decodings (the integer one and the F16C one for large block scales, and for blocks with E4M3
// subnormals or zeros) giving identical results; the CPU backend's bitmap of those blocks.
#include "core/parallel.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm_nt.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/linear.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
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
        std::vector<Expect> e(10);
        std::vector<cpu::LinearTask> tasks = {
            {&vb, x256.data(), nullptr, 3, nullptr, cpu::ActivationMode::exact},
            {&vm, x512.data(), nullptr, 2, nullptr, cpu::ActivationMode::int8},
            {&va, x512.data(), nullptr, 3, nullptr, cpu::ActivationMode::int8},
            {&va, nullptr, &xq, 2, nullptr, cpu::ActivationMode::exact},
            {&vf, x256.data(), nullptr, 1, nullptr, cpu::ActivationMode::exact},
            {&vf, x256.data(), nullptr, 0, nullptr, cpu::ActivationMode::exact},  // empty task
            // Int8 tasks over task 2's activations (the same rows at the same address) share its quantisation; one
            // over other activations must not. Other row counts or widths over the same buffer quantise their own
            // (the results would be the same either way: the quantiser works per 16 values).
            {&vf, x512.data(), nullptr, 3, nullptr, cpu::ActivationMode::int8},
            {&va, x512.data(), nullptr, 3, nullptr, cpu::ActivationMode::int8},
            {&va, x512.data(), nullptr, 2, nullptr, cpu::ActivationMode::int8},
            {&vf, x256.data(), nullptr, 3, nullptr, cpu::ActivationMode::int8},
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

namespace msa {
namespace {

// E4M3 subnormals and zeros (exponent field 0) in MXFP8 weights: the small-batch GEMV decodes their blocks with F16C
// (a float subnormal in the integer decoding's multiply is slow on x86). Found from the codes or from the bitmap the
// CPU backend computes; either way every output must equal, bit for bit, the prefill route's (the same row in a
// batch of 21 rows, decoded by the integer route) and match a double reference.
TEST(Mxfp8Decodings, ExponentZeroCodesGiveIdenticalResultsOnEveryRoute) {
    test::ScopedCpuFeatures simd{true};
    set_num_threads(1);
    const std::int64_t N = 13, K = 4096 + 256;  // two bitmap words per row, the second partly used
    auto w = test::make_weight(LinearFormat::mxfp8, N, K, 31);
    // Subnormal, zero and negative-zero codes in chosen blocks (first, middle, last of a row, across the word
    // boundary at block 64), plus random blocks; the dense copy follows (value = e4m3 * 2^(scale - 127)).
    std::mt19937 rng(5);
    std::vector<std::pair<std::int64_t, std::int64_t>> set;  // (row, block)
    for (std::int64_t b : {0, 63, 64, 135}) set.push_back({b % N, b});
    for (int i = 0; i < 12; ++i) {
        set.push_back({static_cast<std::int64_t>(rng() % N), static_cast<std::int64_t>(rng() % (K / 32))});
    }
    const std::uint8_t special[] = {0x01, 0x07, 0x81, 0x85, 0x00, 0x80, 0x03};
    for (auto [r, b] : set) {
        for (int j = 0; j < 3; ++j) {
            const std::int64_t col = b * 32 + static_cast<std::int64_t>(rng() % 32);
            const std::uint8_t code = special[rng() % 7];
            w.data[static_cast<std::size_t>(r * K + col)] = code;
            const int m = code & 7;
            const float mag = std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 * 2^-6
            const int scale = w.scales[static_cast<std::size_t>(r * (K / 32) + b)];
            w.dense[static_cast<std::size_t>(r * K + col)] = ((code & 0x80) ? -mag : mag) * std::ldexp(1.0f, scale - 127);
        }
    }
    // The bitmap: exactly the blocks with such a code.
    const auto flags = cpu::mxfp8_exponent_zero_blocks(w.view());
    ASSERT_EQ(flags.size(), static_cast<std::size_t>(N * cpu::mxfp8_flag_words(K)));
    for (std::int64_t r = 0; r < N; ++r)
        for (std::int64_t b = 0; b < K / 32; ++b) {
            bool any = false;
            for (int i = 0; i < 32; ++i) any |= (w.data[static_cast<std::size_t>(r * K + b * 32 + i)] & 0x78) == 0;
            const std::uint64_t word = flags[static_cast<std::size_t>(r * cpu::mxfp8_flag_words(K) + b / 64)];
            ASSERT_EQ(any, ((word >> (b % 64)) & 1) != 0) << "row " << r << " block " << b;
        }
    const std::int64_t M = 21;
    const auto x = test::random_floats(static_cast<std::size_t>(M * K), 32);
    std::vector<float> batch(static_cast<std::size_t>(M * N));
    cpu::linear(w.view(), x.data(), M, batch.data());  // the panel (prefill) route
    WeightView with_bitmap = w.view();
    with_bitmap.mxfp8_exponent_zero_blocks = flags.data();
    for (const WeightView& v : {w.view(), with_bitmap}) {
        for (std::int64_t m : {1, 2, 3, 5}) {
            std::vector<float> y(static_cast<std::size_t>(m * N));
            cpu::linear(v, x.data(), m, y.data());
            ASSERT_EQ(0, std::memcmp(y.data(), batch.data(), y.size() * sizeof(float)))
                << "m " << m << " bitmap " << (v.mxfp8_exponent_zero_blocks != nullptr);
        }
    }
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t n = 0; n < N; ++n) {
            double s = 0, mag = 0;
            for (std::int64_t k = 0; k < K; ++k) {
                const double p = static_cast<double>(x[static_cast<std::size_t>(i * K + k)]) *
                                 w.dense[static_cast<std::size_t>(n * K + k)];
                s += p;
                mag += std::fabs(p);
            }
            ASSERT_NEAR(batch[static_cast<std::size_t>(i * N + n)], s, 2e-6 * mag) << i << " " << n;
        }
}

// The CPU backend attaches the bitmap to the MXFP8 weights it adopts (and to no other format).
TEST(Mxfp8Decodings, CpuBackendAdoptsTheBitmap) {
    cpu::CpuBackend backend;
    auto w = test::make_weight(LinearFormat::mxfp8, 8, 128, 3);
    w.data[5 * 128 + 70] = 0x02;  // row 5, block 2
    const WeightView adopted = backend.adopt_weight(w.view());
    ASSERT_NE(adopted.mxfp8_exponent_zero_blocks, nullptr);
    EXPECT_EQ(adopted.mxfp8_exponent_zero_blocks[5] & 4u, 4u);
    const auto bf = test::make_weight(LinearFormat::bf16, 8, 128, 3);
    EXPECT_EQ(backend.adopt_weight(bf.view()).mxfp8_exponent_zero_blocks, nullptr);
}

}  // namespace
}  // namespace msa

namespace msa {
namespace {

// CpuBackend::linear_group (a layer's projections in one parallel region) equals linear() on each weight, bit for
// bit, in both activation modes and with several threads.
TEST(LinearGroup, EqualsLinearOnEachWeight) {
    cpu::CpuBackend backend;
    const std::int64_t K = 256;
    const auto a = test::make_weight(LinearFormat::mxfp8, 96, K, 1);
    const auto b = test::make_weight(LinearFormat::nvfp4, 40, K, 2);
    const auto c = test::make_weight(LinearFormat::bf16, 7, K, 3);
    const WeightView va = backend.adopt_weight(a.view()), vb = b.view(), vc = c.view();
    const WeightView* ws[] = {&va, &vb, &vc};
    for (std::size_t threads : {1, 3}) {
        set_num_threads(threads);
        for (auto mode : {ActivationMode::exact, ActivationMode::int8}) {
            for (std::int64_t m : {1, 3}) {
                const auto x = test::random_floats(static_cast<std::size_t>(m * K), 5 + static_cast<std::uint32_t>(m));
                std::vector<std::vector<float>> got(3), want(3);
                float* ys[3];
                for (int i = 0; i < 3; ++i) {
                    got[i].assign(static_cast<std::size_t>(m * ws[i]->rows), -1.0f);
                    want[i].assign(got[i].size(), -2.0f);
                    ys[i] = got[i].data();
                    cpu::linear(*ws[i], x.data(), m, want[i].data(), mode);
                }
                backend.linear_group(ws, x.data(), m, ys, mode);
                for (int i = 0; i < 3; ++i) {
                    ASSERT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
                        << "weight " << i << " m " << m << " threads " << threads;
                }
            }
        }
    }
    set_num_threads(1);
}

}  // namespace
}  // namespace msa
