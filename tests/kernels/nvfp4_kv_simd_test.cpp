// The AVX2 NVFP4 KV kernels against independent references on arbitrary stored bytes (every E2M1 code, every finite
// E4M3 scale including subnormal and negative ones) and head sizes that are not a multiple of their 32-value step:
// read_kv_rows against the formats library's dequantiser, dot_kv_rows (fused) bit for bit against the scalar
// decoding followed by the FP32 GEMM; and pv_accumulate_rows bit for bit against one pv_accumulate call per row. The
// AVX-512 versions of the fused product and of pv_accumulate_rows equal the AVX2 ones bit for bit.
#include "core/cpu_features.h"
#include "kernels/cpu/gemm_nt.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/softmax_pv.h"
#include "formats/scalar_formats.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace msa {
namespace {

// Random bytes in a page's NVFP4 rows: any code pair; scales drawn from every E4M3 code except NaN (0x7F, 0xFF),
// with the extremes (0, the smallest subnormal, 448, -448) forced into the first rows.
void fill_random_nvfp4(const PagedRows& rows, std::int32_t page, std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (int t = 0; t < 128; ++t) {
        std::uint8_t* d = rows.row_data(page, t);
        std::uint8_t* s = rows.row_scales(page, t);
        for (int i = 0; i < rows.dim / 2; ++i) d[i] = static_cast<std::uint8_t>(rng());
        for (int g = 0; g < rows.dim / 16; ++g) {
            std::uint8_t code;
            do {
                code = static_cast<std::uint8_t>(rng());
            } while ((code & 0x7F) == 0x7F);
            s[g] = code;
        }
    }
    const std::uint8_t extremes[] = {0x00, 0x01, 0x7E, 0xFE, 0x80, 0x08};
    for (int t = 0; t < 6; ++t)
        for (int g = 0; g < rows.dim / 16; ++g) rows.row_scales(page, t)[g] = extremes[(t + g) % 6];
    // One row with every code of each nibble position.
    for (int i = 0; i < rows.dim / 2; ++i) rows.row_data(page, 7)[i] = static_cast<std::uint8_t>((i % 16) | ((15 - i % 16) << 4));
}

class Nvfp4KvSimdTest : public ::testing::TestWithParam<int> {};

TEST_P(Nvfp4KvSimdTest, ReadRowsEqualsFormatsLibrary) {
    const int dim = GetParam();
    test::TestKvLayer layer(KvCacheDtype::NVFP4, 1, dim, dim, 2);
    const PagedRows rows = layer.view.v(0);
    fill_random_nvfp4(rows, 1, 100 + static_cast<std::uint32_t>(dim));
    for (const bool simd : {true, false}) {
        test::ScopedCpuFeatures mode(simd);
        std::vector<float> exact(static_cast<std::size_t>(128 * dim)), rounded(exact.size());
        cpu::read_kv_rows(rows, 1, 128, cpu::KvRead::exact, exact.data());
        cpu::read_kv_rows(rows, 1, 128, cpu::KvRead::e4m3, rounded.data());
        for (int t = 0; t < 128; ++t) {
            const auto ref = test::stored_row(rows, 1, t);
            for (int i = 0; i < dim; ++i) {
                // Float equality: the SIMD decoding gives +0 for the code -0 (doubled integer 0), which no sum
                // can tell apart (accumulators start at +0).
                ASSERT_EQ(exact[static_cast<std::size_t>(t * dim + i)], ref[static_cast<std::size_t>(i)])
                    << "dim " << dim << " row " << t << " i " << i << " simd " << simd;
                ASSERT_EQ(rounded[static_cast<std::size_t>(t * dim + i)], e4m3_to_float(float_to_e4m3(ref[i])))
                    << "dim " << dim << " row " << t << " i " << i << " simd " << simd;
            }
        }
    }
}

TEST_P(Nvfp4KvSimdTest, FusedDotEqualsScalarDecodeThenGemm) {
    const int dim = GetParam();
    test::TestKvLayer layer(KvCacheDtype::NVFP4, 1, dim, dim, 2);
    const PagedRows rows = layer.view.k(0);
    fill_random_nvfp4(rows, 1, 200 + static_cast<std::uint32_t>(dim));
    std::vector<float> scratch, keys(static_cast<std::size_t>(128 * dim));
    for (const auto mode : {cpu::KvRead::exact, cpu::KvRead::e4m3}) {
        {
            test::ScopedCpuFeatures scalar(false);
            cpu::read_kv_rows(rows, 1, 128, mode, keys.data());
        }
        for (const int count : {128, 127, 5, 1}) {
            for (const std::int64_t arows : {1, 2, 3, 4, 6, 8}) {
                auto a = test::random_floats(static_cast<std::size_t>(arows * dim), 7 + static_cast<std::uint32_t>(arows), -3.0f, 3.0f);
                a[0] = 0.0f;
                a[static_cast<std::size_t>(arows * dim - 1)] = -1e-30f;
                const std::int64_t ldo = 131;
                std::vector<float> got(static_cast<std::size_t>(arows * ldo), -7.0f), want(got.size(), -7.0f);
                cpu::dot_kv_rows(rows, 1, count, mode, a.data(), arows, got.data(), ldo, scratch);
                cpu::gemm_nt_f32(a.data(), dim, keys.data(), dim, want.data(), ldo, arows, count, dim);
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                    << "dim " << dim << " count " << count << " arows " << arows << " mode " << static_cast<int>(mode);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Nvfp4KvSimdTest, ::testing::Values(16, 48, 64, 80, 128, 208));

TEST(PvAccumulateRows, EqualsOneCallPerRowBitForBit) {
    std::mt19937 rng(5);
    for (const int dim : {8, 16, 24, 128, 136}) {
        for (const int n : {1, 7, 77, 128}) {
            for (const int rows : {1, 2, 3, 4, 5, 8, 9}) {
                for (const bool q8 : {false, true}) {
                    const int ldp = 130;
                    auto v = test::random_floats(static_cast<std::size_t>(n * dim), rng(), -2.0f, 2.0f);
                    std::vector<float> p(static_cast<std::size_t>(rows * ldp), 0.0f), alpha(static_cast<std::size_t>(rows));
                    for (int i = 0; i < rows; ++i) {
                        for (int j = 0; j < n; ++j) p[static_cast<std::size_t>(i * ldp + j)] = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
                        alpha[static_cast<std::size_t>(i)] = i == 0 ? 0.0f : std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
                    }
                    const auto acc0 = test::random_floats(static_cast<std::size_t>(rows * dim), rng(), -1.0f, 1.0f);
                    for (const bool simd : {true, false}) {
                        test::ScopedCpuFeatures mode(simd);
                        std::vector<float> got = acc0, want = acc0;
                        cpu::pv_accumulate_rows(got.data(), alpha.data(), p.data(), ldp, v.data(), n, dim, q8, rows);
                        for (int i = 0; i < rows; ++i)
                            cpu::pv_accumulate(want.data() + i * dim, alpha[static_cast<std::size_t>(i)],
                                               p.data() + i * ldp, v.data(), n, dim, q8);
                        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                            << "dim " << dim << " n " << n << " rows " << rows << " q8 " << q8 << " simd " << simd;
                    }
                }
            }
        }
    }
}

// scaled_max (AVX2: the maximum by lanes) against the scalar fold, bit for bit: zeros of both signs first in either
// order, NaNs and infinities among the values, every tail length.
TEST(ScaledMax, EqualsScalarFoldBitForBit) {
    std::mt19937 rng(11);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (int n = 0; n <= 40; ++n) {
        for (int trial = 0; trial < 40; ++trial) {
            std::vector<float> raw(static_cast<std::size_t>(n));
            for (auto& x : raw) {
                const unsigned kind = rng() % 8;
                x = kind == 0 ? 0.0f
                    : kind == 1 ? -0.0f
                    : kind == 2 ? (rng() % 4 == 0 ? nan : -inf)
                                : std::uniform_real_distribution<float>(-2.0f, trial % 2 ? 0.0f : 2.0f)(rng);
            }
            const float m0 = trial % 3 == 0 ? -inf : trial % 3 == 1 ? -0.0f : -1.0f;
            const float scale = trial % 4 == 0 ? 1.0f : 0.125f;
            float want = m0;
            for (const float x : raw) want = std::max(want, x * scale);
            for (const bool simd : {true, false}) {
                test::ScopedCpuFeatures mode(simd);
                const float got = cpu::scaled_max(raw.data(), n, scale, m0);
                ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float))) << "n " << n << " trial " << trial << " simd " << simd;
            }
        }
    }
}

TEST(Nvfp4KvAvx512, FusedDotAndPvEqualAvx2BitForBit) {
    if (!cpu_features().avx512) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, DQ, VL, VNNI)";
    CpuFeatures avx2_only = cpu_features();
    avx2_only.avx512 = false;
    std::vector<float> scratch;
    for (const int dim : {32, 64, 128, 160}) {
        test::TestKvLayer layer(KvCacheDtype::NVFP4, 1, dim, dim, 2);
        const PagedRows rows = layer.view.k(0);
        fill_random_nvfp4(rows, 1, 300 + static_cast<std::uint32_t>(dim));
        std::vector<float> read_wide(static_cast<std::size_t>(128 * dim)), read_narrow(read_wide.size());
        cpu::read_kv_rows(rows, 1, 128, cpu::KvRead::exact, read_wide.data());
        {
            test::ScopedCpuFeatures only(avx2_only);
            cpu::read_kv_rows(rows, 1, 128, cpu::KvRead::exact, read_narrow.data());
        }
        ASSERT_EQ(0, std::memcmp(read_wide.data(), read_narrow.data(), read_wide.size() * sizeof(float)))
            << "read: dim " << dim;
        for (const int count : {128, 127, 77, 4, 3, 1}) {
            for (const std::int64_t arows : {1, 2, 3, 4, 5, 8}) {
                const auto a = test::random_floats(static_cast<std::size_t>(arows * dim),
                                                   17 + static_cast<std::uint32_t>(count), -3.0f, 3.0f);
                const std::int64_t ldo = 129;
                std::vector<float> wide(static_cast<std::size_t>(arows * ldo), -7.0f), narrow(wide.size(), -7.0f);
                cpu::dot_kv_rows(rows, 1, count, cpu::KvRead::exact, a.data(), arows, wide.data(), ldo, scratch);
                {
                    test::ScopedCpuFeatures only(avx2_only);
                    cpu::dot_kv_rows(rows, 1, count, cpu::KvRead::exact, a.data(), arows, narrow.data(), ldo, scratch);
                }
                ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
                    << "dot: dim " << dim << " count " << count << " arows " << arows;
            }
        }
    }
    std::mt19937 rng(9);
    for (const int dim : {16, 48, 128}) {
        for (const int n : {1, 77, 128}) {
            for (const int nrows : {1, 3, 4, 8}) {
                for (const bool q8 : {false, true}) {
                    const auto v = test::random_floats(static_cast<std::size_t>(n * dim), rng(), -2.0f, 2.0f);
                    const auto p = test::random_floats(static_cast<std::size_t>(nrows * 128), rng(), 0.0f, 1.0f);
                    const auto alpha = test::random_floats(static_cast<std::size_t>(nrows), rng(), 0.0f, 1.0f);
                    const auto acc0 = test::random_floats(static_cast<std::size_t>(nrows * dim), rng(), -1.0f, 1.0f);
                    std::vector<float> wide = acc0, narrow = acc0;
                    cpu::pv_accumulate_rows(wide.data(), alpha.data(), p.data(), 128, v.data(), n, dim, q8, nrows);
                    {
                        test::ScopedCpuFeatures only(avx2_only);
                        cpu::pv_accumulate_rows(narrow.data(), alpha.data(), p.data(), 128, v.data(), n, dim, q8,
                                                nrows);
                    }
                    ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
                        << "pv: dim " << dim << " n " << n << " rows " << nrows << " q8 " << q8;
                }
            }
        }
    }
}

// The key product with 16 stored rows per register (kv_dot_keys_avx512.cpp, rows of 128 values) against the AVX2
// kernel, bit for bit: every partial tile size, 1-8 query rows (tiles of 4 and their remainders), queries with
// zeros, tiny and large values.
TEST(Nvfp4KvAvx512, KeysInLanesDotEqualsAvx2BitForBit) {
    if (!cpu_features().avx512) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, DQ, VL, VNNI)";
    CpuFeatures avx2_only = cpu_features();
    avx2_only.avx512 = false;
    std::vector<float> scratch;
    const int dim = 128;
    test::TestKvLayer layer(KvCacheDtype::NVFP4, 1, dim, dim, 3);
    const PagedRows rows = layer.view.k(0);
    fill_random_nvfp4(rows, 1, 500);
    fill_random_nvfp4(rows, 2, 501);
    for (const std::int32_t page : {1, 2}) {
        for (int count = 1; count <= 128; count += count < 34 ? 1 : 31) {
            for (std::int64_t arows = 1; arows <= 8; ++arows) {
                auto a = test::random_floats(static_cast<std::size_t>(arows * dim),
                                             31 + static_cast<std::uint32_t>(count * 8 + arows), -3.0f, 3.0f);
                a[0] = 0.0f;
                a[1] = -0.0f;
                a[2] = 1e-30f;
                a[static_cast<std::size_t>(arows * dim - 1)] = 3e30f;
                const std::int64_t ldo = 133;
                std::vector<float> wide(static_cast<std::size_t>(arows * ldo), -7.0f), narrow(wide.size(), -7.0f);
                cpu::dot_kv_rows(rows, page, count, cpu::KvRead::exact, a.data(), arows, wide.data(), ldo, scratch);
                {
                    test::ScopedCpuFeatures only(avx2_only);
                    cpu::dot_kv_rows(rows, page, count, cpu::KvRead::exact, a.data(), arows, narrow.data(), ldo,
                                     scratch);
                }
                ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
                    << "page " << page << " count " << count << " arows " << arows;
            }
        }
    }
}

// The PV step straight from the page (pv_kv_rows, decode's path for a block of one query) against reading the rows
// and then pv_accumulate_rows, bit for bit: every row count up to two tiles of eight, partial pages, alpha 0 and 1.
TEST(Nvfp4KvAvx512, FusedPvEqualsReadThenAccumulateBitForBit) {
    test::TestKvLayer probe(KvCacheDtype::NVFP4, 1, 128, 128, 2);
    if (!cpu::pv_kv_rows_fused(probe.view.v(0), cpu::KvRead::exact))
        GTEST_SKIP() << "no fused PV kernel on this CPU (it needs AVX-512: F, BW, DQ, VL, VNNI)";
    EXPECT_FALSE(cpu::pv_kv_rows_fused(probe.view.v(0), cpu::KvRead::e4m3));
    std::mt19937 rng(21);
    for (const int dim : {32, 64, 128, 160}) {
        test::TestKvLayer layer(KvCacheDtype::NVFP4, 1, dim, dim, 2);
        const PagedRows rows = layer.view.v(0);
        fill_random_nvfp4(rows, 1, 400 + static_cast<std::uint32_t>(dim));
        std::vector<float> v(static_cast<std::size_t>(128 * dim));
        cpu::read_kv_rows(rows, 1, 128, cpu::KvRead::exact, v.data());
        for (const int count : {128, 77, 2, 1}) {
            for (int nrows = 1; nrows <= 17; ++nrows) {
                const int ldp = 131;
                const auto p = test::random_floats(static_cast<std::size_t>(nrows * ldp), rng(), -0.5f, 1.0f);
                auto alpha = test::random_floats(static_cast<std::size_t>(nrows), rng(), 0.0f, 1.0f);
                alpha[0] = 0.0f;
                if (nrows > 1) alpha[1] = 1.0f;
                const auto acc0 = test::random_floats(static_cast<std::size_t>(nrows * dim), rng(), -1.0f, 1.0f);
                std::vector<float> fused = acc0, want = acc0;
                cpu::pv_kv_rows(rows, 1, count, cpu::KvRead::exact, p.data(), ldp, nrows, alpha.data(), fused.data());
                cpu::pv_accumulate_rows(want.data(), alpha.data(), p.data(), ldp, v.data(), count, dim, false, nrows);
                ASSERT_EQ(0, std::memcmp(fused.data(), want.data(), fused.size() * sizeof(float)))
                    << "dim " << dim << " count " << count << " rows " << nrows;
            }
        }
    }
}

}  // namespace
}  // namespace msa
