// The fused NVFP4 key product of kv_rows_avx2.cpp (dot_kv_rows: query rows against the stored rows of a page) on
// AVX-512, with its results bit for bit (and the exact read of whole rows, read_kv_rows, whose values are exact
// either way): a zmm register holds two stored rows, one per 256-bit half, each decoded
// exactly as the AVX2 kernel decodes its row (doubled E2M1 integers times half the block scale), and the query's
// 8 columns are broadcast to both halves, so each half performs that row's AVX2 FMA chain and the same final sum.
// Also the PV step straight from stored value rows (pv_kv_rows), decoding by table lookup, with the bits of reading
// the rows and then pv_accumulate_rows. Exact read mode and row lengths of whole block pairs (dim a multiple of 32)
// only; kv_rows.cpp sends the rest to AVX2.

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/kv_rows_simd.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <algorithm>

namespace msa::cpu {
namespace {

// Stored NVFP4 values by table lookup: vpermt2ps picks each lane's value from two 16-entry tables, the doubled E2M1
// values times half of a block scale (exact products, as e2m1 * scale), index bit 4 choosing the second table. An
// index is a code nibble, masked, with that bit or-ed in.
struct Nvfp4Lookup {
    const float* half = e4m3_half_table();
    // Doubled E2M1 values of codes 0-15 (code 8, negative zero, reads as the integer 0, as doubled_e2m1_x32 has it).
    const __m512 doubled = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m512i low4 = _mm512_set1_epi32(0xF);
    // Bit 4 in lanes 8-15: those lanes hold codes of the second block of a pair, so they read the second table.
    const __m512i second = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);

    __m512 table(std::uint8_t scale) const { return _mm512_mul_ps(doubled, _mm512_set1_ps(half[scale])); }
    // codes: one code per lane in bits 0-3 (higher bits ignored); lanes 0-7 use t0, lanes 8-15 use t1.
    __m512 values(__m512i codes, __m512 t0, __m512 t1) const {
        return _mm512_permutex2var_ps(t0, _mm512_ternarylogic_epi32(codes, low4, second, 0xEA), t1);
    }
};

// The PV step of R query rows over the first `count` stored rows of a page (see pv_kv_rows): per 32 columns (two
// blocks), 16 code bytes give the even columns (low nibbles) and the odd columns (high nibbles) of both blocks; the
// weighted sums run over the stored rows in order, one FMA each, and are interleaved back into column order at the
// end.
template <int R>
void pv_rows(const PageRows& pr, int count, const float* p, int ldp, const float* alpha, float* acc) {
    const Nvfp4Lookup lut;
    const __m512i even_odd_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i even_odd_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int c = 0; c < pr.dim; c += 32) {
        __m512 even[R], odd[R];
        for (int i = 0; i < R; ++i) even[i] = odd[i] = _mm512_setzero_ps();
        for (int j = 0; j < count; ++j) {
            const std::uint8_t* sc = pr.block_scales(j) + c / 16;
            const __m512 t0 = lut.table(sc[0]), t1 = lut.table(sc[1]);
            const __m512i x =
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pr.codes(j) + c / 2)));
            const __m512 ve = lut.values(x, t0, t1);
            const __m512 vo = lut.values(_mm512_srli_epi32(x, 4), t0, t1);
            for (int i = 0; i < R; ++i) {
                const __m512 w = _mm512_set1_ps(p[i * ldp + j]);
                even[i] = _mm512_fmadd_ps(w, ve, even[i]);
                odd[i] = _mm512_fmadd_ps(w, vo, odd[i]);
            }
        }
        for (int i = 0; i < R; ++i) {
            const __m512 va = _mm512_set1_ps(alpha[i]);
            float* a = acc + i * pr.dim + c;
            const __m512 o0 = _mm512_permutex2var_ps(even[i], even_odd_lo, odd[i]);
            const __m512 o1 = _mm512_permutex2var_ps(even[i], even_odd_hi, odd[i]);
            // acc * alpha rounded, plus o: what pv_accumulate_rows_avx512 computes (its o * 1 is fused into the add).
            // The explicitly rounded forms keep the compiler from fusing acc * alpha into an FMA here instead.
            constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            _mm512_storeu_ps(a,
                             _mm512_add_round_ps(_mm512_mul_round_ps(_mm512_loadu_ps(a), va, kNearest), o0, kNearest));
            _mm512_storeu_ps(
                a + 16, _mm512_add_round_ps(_mm512_mul_round_ps(_mm512_loadu_ps(a + 16), va, kNearest), o1, kNearest));
        }
    }
}

// pv_rows<rows> for 1 <= rows <= R.
template <int R>
void pv_tile(const PageRows& pr, int count, const float* p, int ldp, int rows, const float* alpha, float* acc) {
    if constexpr (R > 1) {
        if (rows < R) return pv_tile<R - 1>(pr, count, p, ldp, rows, alpha, acc);
    }
    pv_rows<R>(pr, count, p, ldp, alpha, acc);
}

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

void pv_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, const float* p, int ldp, int nrows,
                             const float* alpha, float* acc) {
    const PageRows pr = page_rows(rows, page);
    for (int i0 = 0; i0 < nrows; i0 += 8) {
        float* a = acc + static_cast<std::ptrdiff_t>(i0) * pr.dim;
        const float* pi = p + static_cast<std::ptrdiff_t>(i0) * ldp;
        pv_tile<8>(pr, count, pi, ldp, std::min(8, nrows - i0), alpha + i0, a);
    }
}

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
