// pv_accumulate_rows (softmax_pv_avx2.cpp) on AVX-512, with its results bit for bit: every output column is its own
// FMA chain over the value rows in ascending order there, so a 16-column register performs exactly the chains of
// two 8-column AVX2 registers, and finishes with the same expression. Rows of a multiple of 16 columns only
// (softmax_pv.cpp sends the rest to AVX2).

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/softmax_pv.h"
#include "kernels/kv_layout.h"

#include <immintrin.h>

#include <algorithm>

namespace msa::cpu {
namespace {

template <int R, int C>
inline void pv_rows_slice(float* acc, const float* alpha, const float (*w)[kKvPageTokens], const float* v, int n,
                          int dim, int d0, __m512 vc) {
    __m512 o[R][C];
    for (int i = 0; i < R; ++i)
        for (int c = 0; c < C; ++c) o[i][c] = _mm512_setzero_ps();
    for (int j = 0; j < n; ++j) {
        __m512 vj[C];
        for (int c = 0; c < C; ++c) vj[c] = _mm512_loadu_ps(v + j * dim + d0 + 16 * c);
        for (int i = 0; i < R; ++i) {
            const __m512 wj = _mm512_set1_ps(w[i][j]);
            for (int c = 0; c < C; ++c) o[i][c] = _mm512_fmadd_ps(wj, vj[c], o[i][c]);
        }
    }
    for (int i = 0; i < R; ++i) {
        const __m512 va = _mm512_set1_ps(alpha[i]);
        for (int c = 0; c < C; ++c) {
            float* a = acc + i * dim + d0 + 16 * c;
            _mm512_storeu_ps(a, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(a), va), _mm512_mul_ps(o[i][c], vc)));
        }
    }
}

template <int R>
void pv_rows(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim, bool q8kv4) {
    const __m512 vc = _mm512_set1_ps(q8kv4 ? 1.0f / 448.0f : 1.0f);
    alignas(64) float w[R][kKvPageTokens];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < n; ++j) w[i][j] = q8kv4 ? round_to_e4m3(p[i * ldp + j] * 448.0f) : p[i * ldp + j];
    int d0 = 0;
    for (; d0 + 32 <= dim; d0 += 32) pv_rows_slice<R, 2>(acc, alpha, w, v, n, dim, d0, vc);
    if (d0 < dim) pv_rows_slice<R, 1>(acc, alpha, w, v, n, dim, d0, vc);
}

}  // namespace

void pv_accumulate_rows_avx512(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                               bool q8kv4, int rows) {
    for_row_tiles(rows, [&](auto r, std::int64_t i0) {
        pv_rows<r>(acc + i0 * dim, alpha + i0, p + i0 * ldp, ldp, v, n, dim, q8kv4);
    });
}

}  // namespace msa::cpu
