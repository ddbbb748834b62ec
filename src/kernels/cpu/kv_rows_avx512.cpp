// The fused NVFP4 key product of kv_rows_avx2.cpp (dot_kv_rows: query rows against the stored rows of a page) on
// AVX-512, with its results bit for bit (and the exact read of whole rows, read_kv_rows, whose values are exact
// either way): a zmm register holds two stored rows, one per 256-bit half, each decoded
// exactly as the AVX2 kernel decodes its row (doubled E2M1 integers times half the block scale), and the query's
// 8 columns are broadcast to both halves, so each half performs that row's AVX2 FMA chain and the same final sum.
// Exact read mode and row lengths of whole block pairs (dim a multiple of 32) only; kv_rows.cpp sends the rest to
// AVX2.

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/kv_rows_simd.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <algorithm>

namespace msa::cpu {
namespace {

// Block values of two stored rows: v0 = values 0-7 of row a | of row b, v1 = values 8-15 of both.
inline void pair_block_values(__m128i ints_a, __m128i ints_b, const float* half_a, const float* half_b, __m512& v0,
                              __m512& v1) {
    const __m512 hs = avx512::halves(_mm256_broadcast_ss(half_a), _mm256_broadcast_ss(half_b));
    v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(ints_a, ints_b))), hs);
    v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpackhi_epi64(ints_a, ints_b))), hs);
}

// R query rows against TP pairs of stored rows: stored rows rows[0..2 TP) (a pair may name one row twice: the last
// odd row), outputs out[i * ldo + t[u]] for the first `store` of them.
template <int R, int TP>
inline void dot_pairs(const PageRows& p, const int (&t)[2 * TP], int store, const float* a, float* out,
                      std::int64_t ldo) {
    const int blocks = p.dim / 16;
    const int dim = p.dim;
    const float* half = e4m3_half_table();
    const std::uint8_t* d[2 * TP];
    const std::uint8_t* s[2 * TP];
    for (int u = 0; u < 2 * TP; ++u) {
        d[u] = p.codes(t[u]);
        s[u] = p.block_scales(t[u]);
    }
    __m512 acc[TP][R];
    for (int q = 0; q < TP; ++q)
        for (int i = 0; i < R; ++i) acc[q][i] = _mm512_setzero_ps();
    auto block_fma = [&](int col, const __m512(&v0)[TP], const __m512(&v1)[TP]) __attribute__((always_inline)) {
        for (int i = 0; i < R; ++i) {
            const __m512 a0 = _mm512_broadcast_f32x8(_mm256_loadu_ps(a + i * dim + col));
            const __m512 a1 = _mm512_broadcast_f32x8(_mm256_loadu_ps(a + i * dim + col + 8));
            for (int q = 0; q < TP; ++q) {
                acc[q][i] = _mm512_fmadd_ps(a0, v0[q], acc[q][i]);
                acc[q][i] = _mm512_fmadd_ps(a1, v1[q], acc[q][i]);
            }
        }
    };
    for (int g = 0; g < blocks; g += 2) {
        Ints32 ints[2 * TP];
        for (int u = 0; u < 2 * TP; ++u) ints[u] = doubled_e2m1_x32(d[u] + g * 8);
        __m512 v0[TP], v1[TP];
        for (int q = 0; q < TP; ++q)
            pair_block_values(ints[2 * q].lo, ints[2 * q + 1].lo, half + s[2 * q][g], half + s[2 * q + 1][g], v0[q],
                              v1[q]);
        block_fma(g * 16, v0, v1);
        for (int q = 0; q < TP; ++q)
            pair_block_values(ints[2 * q].hi, ints[2 * q + 1].hi, half + s[2 * q][g + 1], half + s[2 * q + 1][g + 1],
                              v0[q], v1[q]);
        block_fma(g * 16 + 16, v0, v1);
    }
    for (int q = 0; q < TP; ++q)
        for (int i = 0; i < R; ++i) {
            if (2 * q < store) out[i * ldo + t[2 * q]] = avx2::hsum(_mm512_castps512_ps256(acc[q][i]));
            if (2 * q + 1 < store) out[i * ldo + t[2 * q + 1]] = avx2::hsum(_mm512_extractf32x8_ps(acc[q][i], 1));
        }
}

template <int R>
void dot_rows(const PageRows& p, int count, const float* a, float* out, std::int64_t ldo) {
    constexpr int TP = R == 1 ? 4 : 2;  // at least 4 independent FMA chains (TP x R), as in the AVX2 kernel
    int t = 0;
    for (; t + 2 * TP <= count; t += 2 * TP) {
        int rows[2 * TP];
        for (int u = 0; u < 2 * TP; ++u) rows[u] = t + u;
        dot_pairs<R, TP>(p, rows, 2 * TP, a, out, ldo);
    }
    for (; t < count; t += 2) {
        const int rows[2] = {t, std::min(t + 1, count - 1)};
        dot_pairs<R, 1>(p, rows, std::min(2, count - t), a, out, ldo);
    }
}

}  // namespace

void read_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, float* out) {
    const PageRows p = page_rows(rows, page);
    const float* half = e4m3_half_table();
    auto block = [&](__m128i ints, const std::uint8_t* scale, float* o) __attribute__((always_inline)) {
        _mm512_storeu_ps(o,
                         _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ints)), _mm512_set1_ps(half[*scale])));
    };
    for (int t = 0; t < count; ++t) {
        const std::uint8_t* d = p.codes(t);
        const std::uint8_t* s = p.block_scales(t);
        float* o = out + static_cast<std::ptrdiff_t>(t) * p.dim;
        for (int g = 0; g < p.dim / 16; g += 2) {
            const Ints32 ints = doubled_e2m1_x32(d + g * 8);
            block(ints.lo, s + g, o + g * 16);
            block(ints.hi, s + g + 1, o + g * 16 + 16);
        }
    }
}

void dot_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, const float* a, std::int64_t arows,
                              float* out, std::int64_t ldo) {
    const PageRows p = page_rows(rows, page);
    for_row_tiles(arows,
                  [&](auto mr, std::int64_t i0) { dot_rows<mr>(p, count, a + i0 * p.dim, out + i0 * ldo, ldo); });
}

}  // namespace msa::cpu
