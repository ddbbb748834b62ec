// The integer NVFP4 GEMM (linear_q8: NVFP4 weights x int8 activations, the route of M3.1's W4A4 experts and of the
// int8 mode) on arbitrary bytes, SIMD and scalar, against a reference written here from the format definitions
// (formats.md: E2M1 = sign, 2 exponent bits, 1 mantissa bit; E4M3 = sign, 4 exponent bits bias 7, 3 mantissa bits,
// subnormals below 2^-6), computed in double. Covers every E2M1 code (including -0), E4M3 block scales 0, -0,
// subnormals, +-448 and negatives, activations at the int8 limits and the doubled E2M1 values of W4A4, row lengths
// that take the AVX2 kernel (multiples of 64, also odd numbers of 64) and those that take the scalar path, and
// tile remainders (output counts not a multiple of the tile width, 1-9 activation rows).
#include "formats/nvfp4.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "support/cpu_mode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace msa {
namespace {

double e2m1_ref(unsigned code) {
    const double sign = (code & 8) ? -1.0 : 1.0;
    const unsigned e = (code >> 1) & 3, m = code & 1;
    return sign * (e == 0 ? 0.5 * m : (1.0 + 0.5 * m) * std::ldexp(1.0, static_cast<int>(e) - 1));
}

double e4m3_ref(unsigned code) {
    const double sign = (code & 0x80) ? -1.0 : 1.0;
    const unsigned e = (code >> 3) & 15, m = code & 7;
    return sign * (e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, static_cast<int>(e) - 7));
}

// A random E4M3 scale code, finite (0x7F / 0xFF are NaN), with the edge codes often.
std::uint8_t scale_code(std::mt19937& rng) {
    static const std::uint8_t edges[] = {0x00, 0x80, 0x01, 0x03, 0x07, 0x81, 0x87, 0x08, 0x7E, 0xFE, 0x38, 0x77};
    if (rng() % 4 == 0) return edges[rng() % sizeof edges];
    std::uint8_t c;
    do c = static_cast<std::uint8_t>(rng()); while ((c & 0x7F) == 0x7F);
    return c;
}

struct Problem {
    std::int64_t n, k, m;
    std::vector<std::uint8_t> codes, scales;
    float global = 1.0f;
    std::vector<std::int8_t> q;  // [m][k] in element order (placed into the stored order by q8_index)
    cpu::Q8Rows xq;
    WeightView view() const {
        return {LinearFormat::nvfp4, n, k, codes.data(), scales.data(), global};
    }
};

// w4a4: activations are doubled E2M1 integers with E4M3 group scales (d = scale / 2), as quantize_rows_w4a4 gives;
// otherwise int8 values with arbitrary positive group units, as quantize_rows_q8 gives.
Problem make_problem(std::int64_t n, std::int64_t k, std::int64_t m, bool w4a4, std::uint32_t seed) {
    std::mt19937 rng(seed);
    Problem p{n, k, m, {}, {}, 1.0f, {}, {}};
    p.codes.resize(static_cast<std::size_t>(n * k / 2));
    p.scales.resize(static_cast<std::size_t>(n * k / 16));
    for (auto& c : p.codes) c = static_cast<std::uint8_t>(rng());
    for (auto& s : p.scales) s = scale_code(rng);
    // Extremes: a row of all +6 at scale 448 and one of all -6 (the largest integer sums).
    if (n > 2) {
        std::fill_n(p.codes.begin(), k / 2, std::uint8_t{0x77});
        std::fill_n(p.scales.begin(), k / 16, std::uint8_t{0x7E});
        std::fill_n(p.codes.begin() + k / 2, k / 2, std::uint8_t{0xFF});
    }
    p.global = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    static const std::int8_t doubled[] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    p.q.resize(static_cast<std::size_t>(m * k));
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < k; ++j) {
            std::int8_t v;
            if (i == 0) {
                v = w4a4 ? 12 : 127;  // the largest activations against the extreme rows
            } else if (w4a4) {
                v = doubled[rng() % 16];
            } else {
                const int r = static_cast<int>(rng() % 8);
                v = r == 0 ? 127 : (r == 1 ? -127 : static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127));
            }
            p.q[static_cast<std::size_t>(i * k + j)] = v;
        }
    p.xq.m = m;
    p.xq.k = k;
    p.xq.q.resize(static_cast<std::size_t>(m * k));
    p.xq.d.resize(static_cast<std::size_t>(m * k / 16));
    p.xq.row_mul.resize(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < k; ++j)
            p.xq.q[static_cast<std::size_t>(i * k + cpu::q8_index(j, k))] = p.q[static_cast<std::size_t>(i * k + j)];
        for (std::int64_t g = 0; g < k / 16; ++g) {
            float d;
            if (w4a4) {
                std::uint8_t c;
                do c = scale_code(rng); while (c & 0x80);  // activation scales are not negative
                d = static_cast<float>(0.5 * e4m3_ref(c));
            } else {
                d = rng() % 16 == 0 ? 0.0f : std::uniform_real_distribution<float>(1e-4f, 0.1f)(rng);
            }
            p.xq.d[static_cast<std::size_t>(i * (k / 16) + g)] = d;
        }
        p.xq.row_mul[static_cast<std::size_t>(i)] = std::uniform_real_distribution<float>(0.01f, 1.0f)(rng);
    }
    return p;
}

// y[i][r] in double and sum |terms| (for the FP32 rounding bound).
void reference(const Problem& p, std::vector<double>& y, std::vector<double>& mag) {
    y.assign(static_cast<std::size_t>(p.m * p.n), 0.0);
    mag.assign(y.size(), 0.0);
    for (std::int64_t i = 0; i < p.m; ++i)
        for (std::int64_t r = 0; r < p.n; ++r) {
            double s = 0, a = 0;
            for (std::int64_t j = 0; j < p.k; ++j) {
                const std::uint8_t byte = p.codes[static_cast<std::size_t>((r * p.k + j) / 2)];
                const unsigned code = (j & 1) ? byte >> 4 : byte & 0x0F;
                const double w = e2m1_ref(code) * e4m3_ref(p.scales[static_cast<std::size_t>((r * p.k + j) / 16)]);
                const double x = p.q[static_cast<std::size_t>(i * p.k + j)] *
                                 static_cast<double>(p.xq.d[static_cast<std::size_t>(i * (p.k / 16) + j / 16)]);
                s += w * x;
                a += std::fabs(w * x);
            }
            const double post = static_cast<double>(p.global) * p.xq.row_mul[static_cast<std::size_t>(i)];
            y[static_cast<std::size_t>(i * p.n + r)] = s * post;
            mag[static_cast<std::size_t>(i * p.n + r)] = a * post;
        }
}

class Nvfp4Q8GemvTest : public ::testing::TestWithParam<bool> {
protected:
    test::ScopedCpuFeatures mode_{GetParam()};
};

TEST_P(Nvfp4Q8GemvTest, MatchesTheDoubleReferenceOnArbitraryCodes) {
    struct Shape {
        std::int64_t n, k;
    };
    const Shape shapes[] = {{1, 64}, {7, 64}, {13, 192}, {9, 128}, {22, 1088}, {5, 32}, {6, 96}, {11, 160}, {5, 224}, {5, 48}, {4, 16}};
    std::uint32_t seed = 1;
    for (const Shape& s : shapes) {
        for (std::int64_t m : {1, 2, 3, 4, 5, 9}) {
            for (bool w4a4 : {true, false}) {
                const Problem p = make_problem(s.n, s.k, m, w4a4, seed++);
                std::vector<float> y(static_cast<std::size_t>(m * s.n), -1.0f);
                cpu::linear_q8(p.view(), p.xq, y.data());
                std::vector<double> ref, mag;
                reference(p, ref, mag);
                // Each block's integer sum and its product with the scales are exact or rounded once (int8 mode);
                // then FP32 sums over K / 16 blocks and two final multiplies.
                const double eps = std::ldexp(1.0, -24) * static_cast<double>(s.k / 16 + 8);
                for (std::size_t t = 0; t < y.size(); ++t) {
                    ASSERT_NEAR(y[t], ref[t], eps * mag[t] + 1e-30)
                        << "n " << s.n << " k " << s.k << " m " << m << " w4a4 " << w4a4 << " output " << t;
                }
                // A row's result does not depend on the other rows of the batch.
                for (std::int64_t i = 0; i < m; ++i) {
                    cpu::Q8Rows one;
                    one.m = 1;
                    one.k = s.k;
                    one.q.assign(p.xq.q.begin() + i * s.k, p.xq.q.begin() + (i + 1) * s.k);
                    one.d.assign(p.xq.d.begin() + i * (s.k / 16), p.xq.d.begin() + (i + 1) * (s.k / 16));
                    one.row_mul = {p.xq.row_mul[static_cast<std::size_t>(i)]};
                    std::vector<float> y1(static_cast<std::size_t>(s.n));
                    cpu::linear_q8(p.view(), one, y1.data());
                    ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + i * s.n, y1.size() * sizeof(float)))
                        << "row " << i << " n " << s.n << " k " << s.k << " m " << m;
                }
            }
        }
    }
}

// The SIMD and scalar paths agree within FP32 summation order on W4A4 inputs, where every block's product is exact.
TEST(Nvfp4Q8Gemv, SimdEqualsScalarUpToSummationOrder) {
    const Problem p = make_problem(37, 1024, 3, true, 99);
    std::vector<float> simd(static_cast<std::size_t>(3 * 37)), scalar(simd.size());
    cpu::linear_q8(p.view(), p.xq, simd.data());
    {
        test::ScopedCpuFeatures off(false);
        cpu::linear_q8(p.view(), p.xq, scalar.data());
    }
    std::vector<double> ref, mag;
    reference(p, ref, mag);
    for (std::size_t t = 0; t < simd.size(); ++t)
        ASSERT_NEAR(simd[t], scalar[t], std::ldexp(1.0, -24) * 72 * 2 * mag[t] + 1e-30) << t;
}

// The AVX-512 kernel (row pairs, K a multiple of 128, a last odd row on AVX2) gives the AVX2 kernel's results bit
// for bit, on arbitrary codes in both activation modes, for every tile shape and remainder.
TEST(Nvfp4Q8Gemv, Avx512EqualsAvx2BitForBit) {
    if (!cpu_features().avx512) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, DQ, VL, VNNI)";
    CpuFeatures avx2_only = cpu_features();
    avx2_only.avx512 = false;
    std::uint32_t seed = 500;
    for (std::int64_t n : {1, 2, 3, 7, 8, 9, 17, 24}) {
        for (std::int64_t k : {128, 384, 1024}) {
            for (std::int64_t m : {1, 2, 3, 4, 5, 8}) {
                for (bool w4a4 : {true, false}) {
                    const Problem p = make_problem(n, k, m, w4a4, seed++);
                    std::vector<float> wide(static_cast<std::size_t>(m * n), -1.0f), narrow(wide.size(), -2.0f);
                    cpu::linear_q8(p.view(), p.xq, wide.data());
                    {
                        test::ScopedCpuFeatures only(avx2_only);
                        cpu::linear_q8(p.view(), p.xq, narrow.data());
                    }
                    ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
                        << "n " << n << " k " << k << " m " << m << " w4a4 " << w4a4;
                }
            }
        }
    }
}

TEST(Nvfp4Q8Layout, IndexIsABijectionAndGroupSlotsAgree) {
    for (std::int64_t k : {16, 32, 48, 64, 80, 112, 128, 192, 1088}) {
        std::vector<int> seen(static_cast<std::size_t>(k), 0);
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int64_t s = cpu::q8_index(j, k);
            ASSERT_GE(s, 0);
            ASSERT_LT(s, k);
            ++seen[static_cast<std::size_t>(s)];
            // Elements of a 64-chunk stay in it; group slots give the same places.
            ASSERT_EQ(s / 64, j / 64);
            const cpu::Q8GroupSlots g = cpu::q8_group_slots(j / 16, k);
            ASSERT_EQ(s, ((j & 1) ? g.hi : g.lo) + (j % 16) / 2) << "k " << k << " j " << j;
        }
        for (int c : seen) ASSERT_EQ(c, 1) << "k " << k;
    }
}

// quantize_rows_w4a4 (SIMD amax and unpacking, and the scalar path) against the formats library's quantiser and
// dequantiser, element by element through q8_value: every slot of the stored order holds its element.
TEST(W4a4Quantiser, MatchesTheFormatsLibraryInBothPaths) {
    std::mt19937 rng(5);
    for (std::int64_t k : {16, 48, 64, 80, 192, 1088}) {
        const std::int64_t m = 3;
        std::vector<float> x(static_cast<std::size_t>(m * k));
        for (auto& v : x) v = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
        x[1] = std::nanf("");                                    // ignored by the row maximum
        x[static_cast<std::size_t>(k + 2)] = -100.0f;            // the row maximum, negative
        for (std::int64_t j = 0; j < k; ++j) x[static_cast<std::size_t>(2 * k + j)] = 0.0f;  // an all-zero row
        for (auto input : {cpu::W4a4Input::fc1, cpu::W4a4Input::fc2}) {
            cpu::Q8Rows simd, scalar;
            cpu::quantize_rows_w4a4(x.data(), m, k, input, simd);
            {
                test::ScopedCpuFeatures off(false);
                cpu::quantize_rows_w4a4(x.data(), m, k, input, scalar);
            }
            ASSERT_EQ(simd.q, scalar.q) << "k " << k;
            ASSERT_EQ(0, std::memcmp(simd.d.data(), scalar.d.data(), simd.d.size() * sizeof(float))) << "k " << k;
            ASSERT_EQ(simd.row_mul, scalar.row_mul);
            for (std::int64_t i = 0; i < m; ++i) {
                float amax = 0.0f;
                for (std::int64_t j = 0; j < k; ++j) {
                    const float v = std::fabs(x[static_cast<std::size_t>(i * k + j)]);
                    if (v > amax) amax = v;
                }
                std::vector<float> want(static_cast<std::size_t>(k), 0.0f);
                if (input == cpu::W4a4Input::fc2 || amax > 0.0f) {
                    const float S = input == cpu::W4a4Input::fc1 ? 2688.0f / amax : 16.0f;
                    std::vector<std::uint8_t> packed(static_cast<std::size_t>(k / 2)), scales(static_cast<std::size_t>(k / 16));
                    nvfp4_quantize_activation_row(x.data() + i * k, static_cast<std::size_t>(k), S, packed.data(), scales.data());
                    nvfp4_dequantize(packed.data(), scales.data(), static_cast<std::size_t>(k), 1.0f, want.data());
                }
                for (std::int64_t j = 0; j < k; ++j) {
                    const float got = cpu::q8_value(simd, i, j);
                    const float w = want[static_cast<std::size_t>(j)];
                    ASSERT_TRUE(got == w || (std::isnan(got) && std::isnan(w))) << "k " << k << " row " << i << " j " << j << ": " << got << " vs " << w;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, Nvfp4Q8GemvTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? std::string("simd") : std::string("scalar"); });

}  // namespace
}  // namespace msa
