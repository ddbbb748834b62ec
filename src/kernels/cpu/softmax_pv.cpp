#include "kernels/cpu/softmax_pv.h"

#include "core/cpu_features.h"
#include "kernels/cpu/fp_tables.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace msa::cpu {

float online_softmax_block_avx2(const float* raw, int n, float scale, float& m, float& l, float* p);
void pv_accumulate_avx2(float* acc, float alpha, const float* p, const float* v, int n, int dim, bool q8kv4);
void pv_accumulate_rows_avx2(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                             bool q8kv4, int rows);
void pv_accumulate_rows_avx512(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                               bool q8kv4, int rows);
void round_rows_to_e4m3_avx2(float* x, long n);
float scaled_max_avx2(const float* raw, int n, float scale, float m);

float online_softmax_block(const float* raw, int n, float scale, float& m, float& l, float* p) {
    if (cpu_features().avx2) return online_softmax_block_avx2(raw, n, scale, m, l, p);
    float block_max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) block_max = std::max(block_max, raw[j] * scale);
    const float m_new = std::max(m, block_max);
    const float alpha = std::exp(m - m_new);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
        p[j] = std::exp(raw[j] * scale - m_new);
        sum += p[j];
    }
    l = l * alpha + sum;
    m = m_new;
    return alpha;
}

void pv_accumulate(float* acc, float alpha, const float* p, const float* v, int n, int dim, bool q8kv4) {
    if (cpu_features().avx2) {
        pv_accumulate_avx2(acc, alpha, p, v, n, dim, q8kv4);
        return;
    }
    std::vector<float> o(static_cast<std::size_t>(dim), 0.0f);
    for (int j = 0; j < n; ++j) {
        const float w = q8kv4 ? round_to_e4m3(p[j] * 448.0f) : p[j];
        for (int d = 0; d < dim; ++d) o[d] += w * v[j * dim + d];
    }
    const float c = q8kv4 ? 1.0f / 448.0f : 1.0f;
    for (int d = 0; d < dim; ++d) acc[d] = acc[d] * alpha + o[d] * c;
}

void pv_accumulate_rows(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                        bool q8kv4, int rows) {
    if (cpu_features().avx512 && dim % 16 == 0) {
        pv_accumulate_rows_avx512(acc, alpha, p, ldp, v, n, dim, q8kv4, rows);  // the AVX2 results, bit for bit
        return;
    }
    if (cpu_features().avx2) {
        pv_accumulate_rows_avx2(acc, alpha, p, ldp, v, n, dim, q8kv4, rows);
        return;
    }
    for (int i = 0; i < rows; ++i) pv_accumulate(acc + i * dim, alpha[i], p + i * ldp, v, n, dim, q8kv4);
}

float scaled_max(const float* raw, int n, float scale, float m) {
    if (cpu_features().avx2) return scaled_max_avx2(raw, n, scale, m);
    for (int j = 0; j < n; ++j) m = std::max(m, raw[j] * scale);
    return m;
}

void round_rows_to_e4m3(float* x, long n) {
    if (cpu_features().avx2) {
        round_rows_to_e4m3_avx2(x, n);
        return;
    }
    for (long i = 0; i < n; ++i) x[i] = round_to_e4m3(x[i]);
}

}  // namespace msa::cpu
