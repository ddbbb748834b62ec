// Inner steps of the attention kernels (internal to src/kernels/cpu), with AVX2 and scalar versions chosen at run
// time. Both versions do the same operations in the same order per element; only the reduction trees differ.
#pragma once

namespace msa::cpu {

// One block of an online softmax for one query head. raw: n dot products q.k; s = raw * scale.
// Updates the running max m and denominator l, writes p[j] = exp(s_j - m_new) and returns alpha = exp(m - m_new),
// the factor the previous accumulator must be multiplied with (0 when m was -inf).
float online_softmax_block(const float* raw, int n, float scale, float& m, float& l, float* p);

// acc[0..dim) = acc * alpha + c * sum_j w_j * v[j][0..dim) with w_j = p_j (exact) or E4M3(p_j * 448) and
// c = 1/448 (q8kv4). v: [n][dim] row-major; dim a multiple of 8.
void pv_accumulate(float* acc, float alpha, const float* p, const float* v, int n, int dim, bool q8kv4);

// pv_accumulate for `rows` rows sharing v (the query heads of one KV group): row i has accumulator acc + i * dim,
// factor alpha[i] and weights p + i * ldp. Bit for bit the results of `rows` pv_accumulate calls; the AVX2 version
// reads each value of v once for up to 4 rows instead of once per row.
void pv_accumulate_rows(float* acc, const float* alpha, const float* p, int ldp, const float* v, int n, int dim,
                        bool q8kv4, int rows);

// The fold m = std::max(m, raw[j] * scale) over j = 0 .. n - 1 in order, bit for bit: NaN products are skipped, and
// of equal zeros the first one met is kept (the AVX2 version takes the maximum by lanes and repeats the fold only
// when that maximum is zero).
float scaled_max(const float* raw, int n, float scale, float m);

// x[i] = E4M3 value nearest x[i] (Q8KV4 query cast).
void round_rows_to_e4m3(float* x, long n);

}  // namespace msa::cpu
