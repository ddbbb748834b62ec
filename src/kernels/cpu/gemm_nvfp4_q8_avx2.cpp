// Integer NVFP4 GEMM on AVX2: 4-bit weights against int8 activations (quantised per 16 in the fast mode, or the
// exact NVFP4 activations of M3.1's W4A4 experts, whose int8 values are the doubled E2M1 integers).
//
// One step covers 64 weights of a row = 32 bytes = four NVFP4 blocks, loaded as they are stored: one mask leaves the
// low nibbles (even elements), one 16-bit shift and a mask the high nibbles (odd elements), each register holding
// the four blocks' 8 elements one after the other, which is the activations' stored order (activation_quant.h).
// One pshufb per register maps the codes to doubled E2M1 integers plus 12 (0..24, unsigned, so that maddubs takes
// them as they are); the two maddubs products are added as int16, and 12 * (sum of each 4 activations), computed
// once per step for all weight rows, is subtracted, which leaves the exact integer sums of w * x over 4 elements
// (int16 never overflows: at most 2 * 2 * 24 * 127 + 12 * 4 * 127). madd against ones gives 8 int32 sums, two per
// block; they are converted to float and multiplied by the block's product of scales (each scale duplicated into its
// block's two lanes by one permute) in one FMA. So per 64 weights and row: 1 load, 3 ops to split the nibbles, 2
// pshufb, 2 maddubs, 2 adds/subtracts, madd, convert, permute, FMA (the previous kernel used 10 ops per 32 weights).
//
// The integer sums and the block's product of scales are the scalar path's (gemm_scalar.cpp); a block's sum arrives
// in two lanes (8 elements each), each multiplied by the scale product inside the FMA. For W4A4 inputs every such
// product is exact (an integer below 2^12 times a scale product of at most 8 significant bits), so results equal
// the scalar path's up to FP32 summation order; in int8 mode the products round, as in the previous kernel, which
// split the blocks the same way. Per row one 8-lane accumulator over the blocks in K order, the same for every tile
// shape, so a row's result does not depend on the batch.
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace msa::cpu {
namespace {

// MR activation rows against NR consecutive weight rows; K a multiple of 32.
template <int MR, int NR>
void tile(const GemmJob& job, const Q8Rows& xq, std::int64_t i0, std::int64_t n, bool prefetch) {
    const std::int64_t K = job.w->cols;
    const std::int64_t groups = K / 16;
    const Nvfp4TileRows<NR> rows(*job.w, n);
    const auto& wq = rows.codes;
    const auto& ws = rows.scales;
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1DoubledPlus12)));
    const __m256i twelve = _mm256_set1_epi8(12);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    // Lanes 2b and 2b + 1 of a step's int32 sums belong to its block b: the scales of blocks 0-3 (first step of an
    // 8-block group) or 4-7 (second step), each twice.
    const __m256i dup[2] = {_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)};
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
    // c[i][r][b] = the product of scales of block g0 + b: (weight E4M3 * 2^-8) * (activation unit * 128) = weight
    // scale / 2 * unit, one rounding of the same product the scalar path forms. A partial group (the row's last 2, 4
    // or 6 blocks) reads only its own blocks.
    auto scales = [&](std::int64_t g0, int blocks, __m256 (&c)[MR][NR]) __attribute__((always_inline)) {
        __m256 d128[MR];
        for (int i = 0; i < MR; ++i) {
            const float* d = xq.d.data() + (i0 + i) * groups + g0;
            __m256 dv;
            if (blocks == 8) {
                dv = _mm256_loadu_ps(d);
            } else {
                alignas(32) float part[8] = {};
                std::memcpy(part, d, sizeof(float) * static_cast<std::size_t>(blocks));
                dv = _mm256_load_ps(part);
            }
            d128[i] = _mm256_mul_ps(dv, _mm256_set1_ps(128.0f));
        }
        for (int r = 0; r < NR; ++r) {
            __m256 w8;
            if (blocks == 8) {
                w8 = avx2::e4m3x8_times_2e_8(ws[r] + g0);
            } else {
                alignas(8) std::uint8_t part[8] = {};
                std::memcpy(part, ws[r] + g0, static_cast<std::size_t>(blocks));
                w8 = avx2::e4m3x8_times_2e_8(part);
            }
            for (int i = 0; i < MR; ++i) c[i][r] = _mm256_mul_ps(w8, d128[i]);
        }
    };
    // Blocks g0 + 4s .. g0 + 4s + 3.
    auto step = [&](std::int64_t g0, int s, const __m256 (&c)[MR][NR]) __attribute__((always_inline)) {
        const std::int64_t g = g0 + 4 * s;
        __m256i xlo[MR], xhi[MR], offset[MR];
        for (int i = 0; i < MR; ++i) {
            const std::int8_t* x = xq.q.data() + (i0 + i) * K + g * 16;
            xlo[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
            xhi[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
            offset[i] = _mm256_add_epi16(_mm256_maddubs_epi16(twelve, xlo[i]), _mm256_maddubs_epi16(twelve, xhi[i]));
        }
        for (int r = 0; r < NR; ++r) {
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + g * 8));
            const __m256i wlo = _mm256_shuffle_epi8(lut, _mm256_and_si256(b, low4));
            const __m256i whi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(b, 4), low4));
            for (int i = 0; i < MR; ++i) {
                const __m256i p16 = _mm256_sub_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(wlo, xlo[i]), _mm256_maddubs_epi16(whi, xhi[i])), offset[i]);
                const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[i][r] = _mm256_fmadd_ps(p, _mm256_permutevar8x32_ps(c[i][r], dup[s]), acc[i][r]);
            }
        }
    };
    std::int64_t g0 = 0;
    for (; g0 + 8 <= groups; g0 += 8) {
        if (prefetch) {
            // 8 blocks = 64 bytes of each row: fetch the matching bytes of the next tile (NR rows further on).
            for (int r = 0; r < NR; ++r) prefetch_weights(rows.next + r * (K / 2) + g0 * 8);
        }
        __m256 c[MR][NR];
        scales(g0, 8, c);
        step(g0, 0, c);
        step(g0, 1, c);
    }
    if (g0 < groups) {
        const int blocks = static_cast<int>(groups - g0);
        __m256 c[MR][NR];
        scales(g0, blocks, c);
        if (blocks >= 4) step(g0, 0, c);
        if (blocks % 4 == 2) {
            // The row's last 2 blocks (K = 32 mod 64): the same step on 16 bytes. Their activations are stored as a
            // 32-value chunk (16 low-nibble values, then 16 high-nibble ones); the products land in lanes 0-3, and
            // lanes 4-7 add 0.
            const int j = blocks - 2;  // the pair's first block within the group
            const std::int64_t g = g0 + j;
            const __m256i pair = _mm256_setr_epi32(j, j, j + 1, j + 1, 0, 0, 0, 0);
            const __m128i twelve128 = _mm256_castsi256_si128(twelve), lut128 = _mm256_castsi256_si128(lut),
                          low128 = _mm256_castsi256_si128(low4), ones128 = _mm256_castsi256_si128(ones);
            __m128i xlo[MR], xhi[MR], offset[MR];
            for (int i = 0; i < MR; ++i) {
                const std::int8_t* x = xq.q.data() + (i0 + i) * K + g * 16;
                xlo[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
                xhi[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16));
                offset[i] = _mm_add_epi16(_mm_maddubs_epi16(twelve128, xlo[i]), _mm_maddubs_epi16(twelve128, xhi[i]));
            }
            for (int r = 0; r < NR; ++r) {
                const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wq[r] + g * 8));
                const __m128i wlo = _mm_shuffle_epi8(lut128, _mm_and_si128(b, low128));
                const __m128i whi = _mm_shuffle_epi8(lut128, _mm_and_si128(_mm_srli_epi16(b, 4), low128));
                for (int i = 0; i < MR; ++i) {
                    const __m128i p16 = _mm_sub_epi16(
                        _mm_add_epi16(_mm_maddubs_epi16(wlo, xlo[i]), _mm_maddubs_epi16(whi, xhi[i])), offset[i]);
                    const __m256 p = _mm256_zextps128_ps256(_mm_cvtepi32_ps(_mm_madd_epi16(p16, ones128)));
                    acc[i][r] = _mm256_fmadd_ps(p, _mm256_permutevar8x32_ps(c[i][r], pair), acc[i][r]);
                }
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        const std::int64_t row = i0 + i;
        for (int r = 0; r < NR; ++r) {
            job.y[row * job.ldy + n + r] =
                avx2::hsum(acc[i][r]) * job.w->global_scale * xq.row_mul[static_cast<std::size_t>(row)];
        }
    }
}

// Weight rows per tile for mr activation rows (register budget: accumulators, scale products, activations).
template <int MR>
void tile_rows(const GemmJob& job, const Q8Rows& xq, std::int64_t i0) {
    constexpr int NR = MR == 1 ? 4 : (MR == 2 ? 2 : 1);
    std::int64_t n = job.n0;
    for (; n + NR <= job.n1; n += NR) tile<MR, NR>(job, xq, i0, n, n + 2 * NR <= job.n1);
    for (; n < job.n1; ++n) tile<MR, 1>(job, xq, i0, n, false);
}

}  // namespace

// K must be a multiple of 32 (the caller uses the scalar path otherwise).
void gemm_nvfp4_q8_avx2(const GemmJob& job, const Q8Rows& xq) {
    for_row_tiles(job.m, [&](auto mr, std::int64_t i0) { tile_rows<mr>(job, xq, i0); });
}

}  // namespace msa::cpu
