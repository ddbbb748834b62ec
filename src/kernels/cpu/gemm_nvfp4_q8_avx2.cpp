// Integer NVFP4 GEMM on AVX2: 4-bit weights against int8 activations (quantised per 16 in the fast mode, or the
// exact NVFP4 activations of M3.1's W4A4 experts).
//
// One step covers 32 weights = 16 bytes = two NVFP4 blocks: the bytes are broadcast to both halves of a register,
// one variable shift and a mask leave the low nibbles (even elements) in the lower half and the high nibbles (odd
// elements) in the upper half, which is the activations' stored order (activation_quant.h); one pshufb maps the
// codes to doubled E2M1 integers plus 12 (0..24, unsigned, so that maddubs takes them as they are); maddubs gives
// the int16 pair sums of (w + 12) * x, minus 12 * (x0 + x1) (one maddubs of the activations per step, shared by all
// weight rows) leaves the pair sums of w * x exactly; madd gives int32 sums (lanes 0-1 and 4-5 belong to the first
// block, 2-3 and 6-7 to the second), converted to float and multiplied by the per-block product of scales. (Int16
// never overflows: |(w + 12) * x| pairs are at most 24 * 128 * 2.) The integer sums are those of the scalar path,
// so the offset changes no result; it saves the two sign operations per weight row and step that |w| * sign(x, w)
// needed.
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <immintrin.h>

#include <algorithm>

namespace msa::cpu {
namespace {

// Eight E4M3 block scales -> floats times 1/2.
inline __m256 half_scales8(const std::uint8_t* s) {
    return _mm256_mul_ps(avx2::e4m3x8_times_2e_8(s), _mm256_set1_ps(128.0f));
}

// MR activation rows against NR consecutive weight rows. Every output accumulates exactly as with NR = 1 (two
// accumulators alternating by block pair, in K order), so the result does not depend on the tile shape; more rows
// per pass give the core independent work and, with the prefetch of the next NR rows, keep the short rows of decode
// streaming.
template <int MR, int NR>
void tile(const GemmJob& job, const Q8Rows& xq, std::int64_t i0, std::int64_t n, bool prefetch) {
    const std::int64_t K = job.w->cols;
    const std::int64_t groups = K / 16;
    const auto* wbase = static_cast<const std::uint8_t*>(job.w->data);
    const std::uint8_t* wq[NR];
    const std::uint8_t* ws[NR];
    for (int j = 0; j < NR; ++j) {
        wq[j] = wbase + (n + j) * (K / 2);
        ws[j] = job.w->scales + (n + j) * groups;
    }
    const std::uint8_t* next = wbase + (n + NR) * (K / 2);  // the next tile's rows, contiguous after these
    alignas(16) static constexpr std::uint8_t kE2m1DoubledPlus12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                                        12, 11, 10, 9,  8,  6,  4,  0};
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1DoubledPlus12)));
    const __m256i twelve = _mm256_set1_epi8(12);
    const __m256i shifts = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    // For step j (blocks 2j, 2j+1 of an 8-block run): lanes of the first block get its scale, the others the second.
    alignas(32) static const std::int32_t pick[4][8] = {
        {0, 0, 1, 1, 0, 0, 1, 1}, {2, 2, 3, 3, 2, 2, 3, 3}, {4, 4, 5, 5, 4, 4, 5, 5}, {6, 6, 7, 7, 6, 6, 7, 7}};
    __m256 acc0[MR][NR], acc1[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int r = 0; r < NR; ++r) acc0[i][r] = acc1[i][r] = _mm256_setzero_ps();
    for (std::int64_t g0 = 0; g0 < groups; g0 += 8) {
        const int steps = static_cast<int>(std::min<std::int64_t>(8, groups - g0)) / 2;
        if (prefetch) {
            // 8 blocks = 64 bytes of each row: fetch the matching bytes of the next tile (NR rows further on).
            for (int r = 0; r < NR; ++r) _mm_prefetch(reinterpret_cast<const char*>(next + r * (K / 2) + g0 * 8), _MM_HINT_T0);
        }
        __m256 cs[MR][NR];
        for (int r = 0; r < NR; ++r) {
            if (steps == 4) {
                const __m256 wsc = half_scales8(ws[r] + g0);
                for (int i = 0; i < MR; ++i)
                    cs[i][r] = _mm256_mul_ps(wsc, _mm256_loadu_ps(xq.d.data() + (i0 + i) * groups + g0));
            } else {
                alignas(32) float tmp[MR][8] = {};
                for (int i = 0; i < MR; ++i)
                    for (int g = 0; g < 2 * steps; ++g)
                        tmp[i][g] = 0.5f * e4m3_value(ws[r][g0 + g]) *
                                    xq.d[static_cast<std::size_t>((i0 + i) * groups + g0 + g)];
                for (int i = 0; i < MR; ++i) cs[i][r] = _mm256_load_ps(tmp[i]);
            }
        }
        // Block pair j adds into accumulator set j & 1 (named, not indexed, so that they stay in registers).
        auto step = [&](int j, __m256 (&a)[MR][NR]) __attribute__((always_inline)) {
            const std::int64_t g = g0 + 2 * j;
            const __m256i pj = _mm256_load_si256(reinterpret_cast<const __m256i*>(pick[j]));
            __m256i x[MR], offset[MR];
            for (int i = 0; i < MR; ++i) {
                x[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q.data() + (i0 + i) * K + g * 16));
                offset[i] = _mm256_maddubs_epi16(twelve, x[i]);  // 12 * (x0 + x1) per int16 pair
            }
            for (int r = 0; r < NR; ++r) {
                const __m256i b =
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wq[r] + g * 8)));
                const __m256i codes = _mm256_and_si256(_mm256_srlv_epi32(b, shifts), low4);
                const __m256i w12 = _mm256_shuffle_epi8(lut, codes);
                for (int i = 0; i < MR; ++i) {
                    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(w12, x[i]), offset[i]);
                    const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    a[i][r] = _mm256_fmadd_ps(p, _mm256_permutevar8x32_ps(cs[i][r], pj), a[i][r]);
                }
            }
        };
        if (steps == 4) {
            step(0, acc0);
            step(1, acc1);
            step(2, acc0);
            step(3, acc1);
        } else {
            for (int j = 0; j < steps; ++j) {
                if (j & 1) {
                    step(j, acc1);
                } else {
                    step(j, acc0);
                }
            }
        }
    }
    for (int i = 0; i < MR; ++i) {
        const std::int64_t row = i0 + i;
        for (int r = 0; r < NR; ++r) {
            const float s = avx2::hsum(_mm256_add_ps(acc0[i][r], acc1[i][r]));
            job.y[row * job.ldy + n + r] = s * job.w->global_scale * xq.row_mul[static_cast<std::size_t>(row)];
        }
    }
}

// Weight rows per tile for mr activation rows (register budget: mr * nr * 3 accumulators and scales).
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
    for (std::int64_t i0 = 0; i0 < job.m; i0 += 4) {
        const int mr = static_cast<int>(std::min<std::int64_t>(4, job.m - i0));
        switch (mr) {
            case 1: tile_rows<1>(job, xq, i0); break;
            case 2: tile_rows<2>(job, xq, i0); break;
            case 3: tile_rows<3>(job, xq, i0); break;
            default: tile_rows<4>(job, xq, i0); break;
        }
    }
}

}  // namespace msa::cpu
