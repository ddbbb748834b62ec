#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/softmax_pv.h"
#include "kernels/cpu/vec_math_avx2.h"
#include "kernels/kv_layout.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace msa::cpu {
using avx2::hmax;
using avx2::hsum;

float online_softmax_block_avx2(const float* raw, int n, float scale, float& m, float& l, float* p) {
    const __m256 vs = _mm256_set1_ps(scale);
    const int n8 = n / 8 * 8;
    __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < n8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_mul_ps(_mm256_loadu_ps(raw + j), vs));
    float block_max = hmax(vmax);
    for (int j = n8; j < n; ++j) block_max = std::max(block_max, raw[j] * scale);
    const float m_new = std::max(m, block_max);
    const float alpha = _mm256_cvtss_f32(avx2::exp(_mm256_set1_ps(m - m_new)));
    const __m256 vm = _mm256_set1_ps(m_new);
    __m256 vsum = _mm256_setzero_ps();
    for (int j = 0; j < n8; j += 8) {
        const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(raw + j), vs), vm));
        _mm256_storeu_ps(p + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    float sum = hsum(vsum);
    if (n8 < n) {
        alignas(32) float tail_in[8], tail_out[8];
        for (int j = 0; j < 8; ++j) tail_in[j] = n8 + j < n ? raw[n8 + j] * scale - m_new : -INFINITY;
        _mm256_store_ps(tail_out, avx2::exp(_mm256_load_ps(tail_in)));
        for (int j = n8; j < n; ++j) {
            p[j] = tail_out[j - n8];
            sum += p[j];
        }
    }
    l = l * alpha + sum;
    m = m_new;
    return alpha;
}

void pv_accumulate_avx2(float* acc, float alpha, const float* p, const float* v, int n, int dim, bool q8kv4) {
    const __m256 va = _mm256_set1_ps(alpha);
    const __m256 vc = _mm256_set1_ps(q8kv4 ? 1.0f / 448.0f : 1.0f);
    alignas(32) float w[kKvPageTokens];
    for (int j = 0; j < n; ++j) w[j] = q8kv4 ? round_to_e4m3(p[j] * 448.0f) : p[j];
    for (int d0 = 0; d0 < dim; d0 += 64) {
        const int chunks = std::min(8, (dim - d0) / 8);
        __m256 o[8];
        for (int c = 0; c < 8; ++c) o[c] = _mm256_setzero_ps();
        for (int j = 0; j < n; ++j) {
            const __m256 wj = _mm256_set1_ps(w[j]);
            const float* vr = v + j * dim + d0;
            for (int c = 0; c < chunks; ++c) o[c] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vr + 8 * c), o[c]);
        }
        for (int c = 0; c < chunks; ++c) {
            float* a = acc + d0 + 8 * c;
            _mm256_storeu_ps(a, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a), va), _mm256_mul_ps(o[c], vc)));
        }
    }
}

namespace {

// pv_accumulate_avx2 for R rows at once: each C-chunk (8 columns each) slice of v is loaded once per value row for
// all R rows; every row's accumulators take the same FMAs in the same order (value rows ascending) as in
// pv_accumulate_avx2, and finish with the same expression.
template <int R, int C>
inline void pv_rows_slice(float* acc, const float* alpha, const float (*w)[kKvPageTokens], const float* v, int n,
                          int dim, int d0, __m256 vc) {
    __m256 o[R][C];
    for (int i = 0; i < R; ++i)
        for (int c = 0; c < C; ++c) o[i][c] = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
        __m256 vj[C];
        for (int c = 0; c < C; ++c) vj[c] = _mm256_loadu_ps(v + j * dim + d0 + 8 * c);
        for (int i = 0; i < R; ++i) {
            const __m256 wj = _mm256_broadcast_ss(&w[i][j]);
            for (int c = 0; c < C; ++c) o[i][c] = _mm256_fmadd_ps(wj, vj[c], o[i][c]);
        }
    }
    for (int i = 0; i < R; ++i) {
        const __m256 va = _mm256_set1_ps(alpha[i]);
        for (int c = 0; c < C; ++c) {
            float* a = acc + i * dim + d0 + 8 * c;
            _mm256_storeu_ps(a, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a), va), _mm256_mul_ps(o[i][c], vc)));
        }
    }
}

template <int R>
void pv_rows(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim, bool q8kv4) {
    const __m256 vc = _mm256_set1_ps(q8kv4 ? 1.0f / 448.0f : 1.0f);
    alignas(32) float w[R][kKvPageTokens];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < n; ++j) w[i][j] = q8kv4 ? round_to_e4m3(p[i * ldp + j] * 448.0f) : p[i * ldp + j];
    int d0 = 0;
    for (; d0 + 16 <= dim; d0 += 16) pv_rows_slice<R, 2>(acc, alpha, w, v, n, dim, d0, vc);
    if (d0 < dim) pv_rows_slice<R, 1>(acc, alpha, w, v, n, dim, d0, vc);
}

}  // namespace

void pv_accumulate_rows_avx2(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                             bool q8kv4, int rows) {
    for_row_tiles(rows, [&](auto r, std::int64_t i0) {
        pv_rows<r>(acc + i0 * dim, alpha + i0, p + i0 * ldp, ldp, v, n, dim, q8kv4);
    });
}

// _mm256_max_ps(x, v) is (x > v) ? x : v, so each lane folds exactly as std::max(v, x) does; without NaNs in the
// lanes their maximum is the fold's value, whose bits are unique unless it is zero.
float scaled_max_avx2(const float* raw, int n, float scale, float m) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(m);
    int j = 0;
    for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(raw + j), vs), vmax);
    float best = hmax(vmax);
    for (; j < n; ++j) best = std::max(best, raw[j] * scale);
    if (best != 0.0f) return best;
    for (j = 0; j < n; ++j) m = std::max(m, raw[j] * scale);  // +0 or -0: whichever the fold meets first
    return m;
}

void round_rows_to_e4m3_avx2(float* x, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, avx2::round_to_e4m3(_mm256_loadu_ps(x + i)));
    for (; i < n; ++i) x[i] = round_to_e4m3(x[i]);
}

}  // namespace msa::cpu
