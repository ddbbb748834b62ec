// The integer NVFP4 GEMM of gemm_nvfp4_q8_avx2.cpp on AVX-512, with the same results bit for bit: a zmm register
// holds two weight rows, one per 256-bit half, and each half does for its row exactly what the AVX2 kernel does
// (the same exact integer sums of 4 products, the same scale products, the same FMA chain over the blocks in K
// order, the same final reduction). So one instruction serves two rows, and the results do not depend on which
// kernel ran (MSA_NO_AVX512=1 switches this one off).
//
// The integer sums: VNNI's dpbusd adds 4 products of unsigned and signed bytes to an int32 lane, so
// dpbusd(dpbusd(-offset, w_lo, x_lo), w_hi, x_hi) equals the AVX2 kernel's madd(maddubs + maddubs - offset, 1)
// lane for lane (that kernel's int16 sums never saturate; here every sum is int32, exact either way).
//
// Rows come in pairs and K in whole groups of 8 blocks (K a multiple of 128); linear.cpp gives a last odd row and
// other row lengths to the AVX2 kernel.
#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <immintrin.h>

#include <algorithm>

namespace msa::cpu {
namespace {

using avx512::halves;

// MR activation rows against NP pairs of consecutive weight rows (rows n .. n + 2 NP - 1).
template <int MR, int NP>
void tile(const GemmJob& job, const Q8Rows& xq, std::int64_t i0, std::int64_t n, bool prefetch) {
    constexpr int NR = 2 * NP;
    const std::int64_t K = job.w->cols;
    const std::int64_t groups = K / 16;
    const Nvfp4TileRows<NR> rows(*job.w, n);
    const auto& wq = rows.codes;
    const auto& ws = rows.scales;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1DoubledPlus12)));
    const __m512i twelve = _mm512_set1_epi8(12);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    // The AVX2 kernel's per-step scale lanes (blocks 0-3 or 4-7 of the group, each twice), in both halves.
    const __m512i dup[2] = {_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 8, 8, 9, 9, 10, 10, 11, 11),
                            _mm512_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7, 12, 12, 13, 13, 14, 14, 15, 15)};
    __m512 acc[MR][NP];
    for (int i = 0; i < MR; ++i)
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
    for (std::int64_t g0 = 0; g0 < groups; g0 += 8) {
        if (prefetch) {
            for (int r = 0; r < NR; ++r) prefetch_weights(rows.next + r * (K / 2) + g0 * 8);
        }
        // Scale products of the group's 8 blocks, computed as the AVX2 kernel computes them, one row per half.
        __m512 c[MR][NP];
        {
            __m512 d128[MR];
            for (int i = 0; i < MR; ++i) {
                const __m256 d =
                    _mm256_mul_ps(_mm256_loadu_ps(xq.d.data() + (i0 + i) * groups + g0), _mm256_set1_ps(128.0f));
                d128[i] = halves(d, d);
            }
            for (int p = 0; p < NP; ++p) {
                const __m512 w16 = avx512::e4m3x8_pair_times_2e_8(ws[2 * p] + g0, ws[2 * p + 1] + g0);
                for (int i = 0; i < MR; ++i) c[i][p] = _mm512_mul_ps(w16, d128[i]);
            }
        }
        for (int s = 0; s < 2; ++s) {
            const std::int64_t g = g0 + 4 * s;
            __m512i xlo[MR], xhi[MR], neg_offset[MR];
            for (int i = 0; i < MR; ++i) {
                const std::int8_t* x = xq.q.data() + (i0 + i) * K + g * 16;
                xlo[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
                xhi[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
                const __m512i zero = _mm512_setzero_si512();
                neg_offset[i] = _mm512_sub_epi32(
                    zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, twelve, xlo[i]), twelve, xhi[i]));
            }
            for (int p = 0; p < NP; ++p) {
                const __m512i b = halves(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[2 * p] + g * 8)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[2 * p + 1] + g * 8)));
                const __m512i wlo = _mm512_shuffle_epi8(lut, _mm512_and_si512(b, low4));
                const __m512i whi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(b, 4), low4));
                for (int i = 0; i < MR; ++i) {
                    const __m512i sums =
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg_offset[i], wlo, xlo[i]), whi, xhi[i]);
                    acc[i][p] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(dup[s], c[i][p]), acc[i][p]);
                }
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        const std::int64_t row = i0 + i;
        const float row_mul = xq.row_mul[static_cast<std::size_t>(row)];
        for (int p = 0; p < NP; ++p) {
            float* y = job.y + row * job.ldy + n + 2 * p;
            y[0] = avx2::hsum(_mm512_castps512_ps256(acc[i][p])) * job.w->global_scale * row_mul;
            y[1] = avx2::hsum(_mm512_extractf32x8_ps(acc[i][p], 1)) * job.w->global_scale * row_mul;
        }
    }
}

// Row pairs per tile for mr activation rows (register budget: accumulators, scale products, activations).
template <int MR>
void tile_rows(const GemmJob& job, const Q8Rows& xq, std::int64_t i0) {
    constexpr int NP = MR == 1 ? 4 : (MR == 2 ? 2 : 1);
    std::int64_t n = job.n0;
    for (; n + 2 * NP <= job.n1; n += 2 * NP) tile<MR, NP>(job, xq, i0, n, n + 4 * NP <= job.n1);
    for (; n + 2 <= job.n1; n += 2) tile<MR, 1>(job, xq, i0, n, false);
}

}  // namespace

// job.n1 - job.n0 even and K a multiple of 128 (linear.cpp checks both).
void gemm_nvfp4_q8_avx512(const GemmJob& job, const Q8Rows& xq) {
    for_row_tiles(job.m, [&](auto mr, std::int64_t i0) { tile_rows<mr>(job, xq, i0); });
}

}  // namespace msa::cpu
