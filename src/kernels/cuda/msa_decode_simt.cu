// SIMT CUDA kernels of the MSA decode path: the KV insert (norm, RoPE, NVFP4 quantisation) and the first,
// correctness-first FP32 decode kernels (indexer scores, keyed top-k, per-page attention, LSE merge), kept as the
// MsaImpl::kSimt cross-check of the tensor-core path in msa_decode.cu. Layouts and numerics: msa_decode.h.
#include "msa_decode.h"
#include "msa_decode_internal.h"

#include <cuda_fp8.h>
#include <cuda_fp16.h>
#include <math_constants.h>

namespace msa::cuda {
namespace {


__device__ __forceinline__ float e4m3_dec(std::uint8_t b) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}
__device__ __forceinline__ float e2m1_dec(unsigned code) {
    const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    const float m = mag[code & 7u];
    return (code & 8u) ? -m : m;
}
__device__ __forceinline__ unsigned e2m1_enc(float y) {
    const float a = fabsf(y);
    const unsigned m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
    return (y < 0.f && m != 0) ? (m | 8u) : m;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Decodes the 16 E2M1 values of 8 packed bytes.
__device__ __forceinline__ void decode16(uint2 w, float (&k)[16]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const unsigned byte = ((i < 4 ? w.x : w.y) >> ((i & 3) * 8)) & 0xFFu;
        k[2 * i] = e2m1_dec(byte & 0xFu);
        k[2 * i + 1] = e2m1_dec(byte >> 4);
    }
}

// ---- KV insert: one warp per (token, row); rows: K heads, V heads, index-K.
__global__ void kv_insert_kernel(KvInsertArgs a) {
    const int rows = 2 * a.num_kv_heads + 1;
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (warp >= a.num_tokens * rows) return;
    const int tok = warp / rows, r = warp % rows;
    const bool is_k = r < a.num_kv_heads, is_v = !is_k && r < 2 * a.num_kv_heads, is_ik = r == rows - 1;
    const int head = is_k ? r : (is_v ? r - a.num_kv_heads : 0);
    const float* src = is_k ? a.k + ((std::size_t)tok * a.num_kv_heads + head) * kHeadDim
                     : is_v ? a.v + ((std::size_t)tok * a.num_kv_heads + head) * kHeadDim
                            : a.ik + (std::size_t)tok * kHeadDim;
    float4 x4 = reinterpret_cast<const float4*>(src)[lane];
    float x[4] = {x4.x, x4.y, x4.z, x4.w};
    const int pos = a.positions[tok];
    if (!is_v) {
        const float* w = is_ik ? a.ik_norm_w : a.k_norm_w;
        const float ss = warp_sum(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3]);
        const float inv = rsqrtf(ss / kHeadDim + a.eps);
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = x[e] * inv * (1.0f + w[lane * 4 + e]);
        float partner[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) partner[e] = __shfl_xor_sync(0xffffffffu, x[e], 8);
        if (lane < 16) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = (lane & 7) * 4 + e;
                const float inv_freq = powf(a.rope_theta, -(float)i / 32.0f);
                float s, c;
                sincosf((float)pos * inv_freq, &s, &c);
                x[e] = lane < 8 ? x[e] * c - partner[e] * s : x[e] * c + partner[e] * s;
            }
        }
    }
    float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    amax = fmaxf(amax, 1e-12f);
    std::uint8_t sc = (std::uint8_t)__nv_cvt_float_to_fp8(amax / 6.0f, __NV_SATFINITE, __NV_E4M3);
    if (sc == 0) sc = 1;
    const float scale = e4m3_dec(sc);
    unsigned c[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) c[e] = e2m1_enc(__fdiv_rn(x[e], scale));
    const int page = a.page_table[(std::size_t)a.seq_of_token[tok] * a.max_blocks + pos / kBlock];
    const int off = pos % kBlock;
    std::uint8_t* rec = is_ik ? a.ik_cache + (std::size_t)page * kPageHeadBytes
                              : (is_k ? a.k_cache : a.v_cache) +
                                    ((std::size_t)page * a.num_kv_heads + head) * kPageHeadBytes;
    const std::uint16_t packed = (std::uint16_t)((c[0] | (c[1] << 4)) | ((c[2] | (c[3] << 4)) << 8));
    reinterpret_cast<std::uint16_t*>(rec + off * 64)[lane] = packed;
    if ((lane & 3) == 0) rec[kBlock * 64 + off * 8 + lane / 4] = sc;
}

// ---- Indexer block scores: CTA = (page b of request s); thread = token of the page.
constexpr int kMaxRows = 64;  // q_len * index heads
__global__ void __launch_bounds__(128) index_score_kernel(const std::uint8_t* iq, const std::uint8_t* ik_cache,
                                                          const int* page_table, const int* seq_lens, int max_blocks,
                                                          int q_len, int nkv, float* scores) {
    __shared__ float qs[kMaxRows][kHeadDim];
    __shared__ float red[4][kMaxRows];
    const int b = blockIdx.x, s = blockIdx.y, t = threadIdx.x;
    const int rows = q_len * nkv;
    const int kv_len = seq_lens[s];
    const int last_local = (kv_len - 1) / kBlock;  // history blocks are < the last query's local block
    if (b >= last_local || kv_len <= 0) return;    // top-k never reads these scores
    for (int i = t; i < rows * kHeadDim; i += 128)
        qs[i / kHeadDim][i % kHeadDim] = e4m3_dec(iq[(std::size_t)s * rows * kHeadDim + i]);
    const int page = page_table[(std::size_t)s * max_blocks + b];
    const std::uint8_t* rec = ik_cache + (std::size_t)page * kPageHeadBytes;
    uint2 w[8];
    float scl[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        w[g] = reinterpret_cast<const uint2*>(rec + t * 64)[g];
        scl[g] = e4m3_dec(rec[kBlock * 64 + t * 8 + g]);
    }
    __syncthreads();
    const int j = b * kBlock + t;
    for (int r0 = 0; r0 < rows; r0 += 16) {
        float acc[16];
#pragma unroll
        for (int rr = 0; rr < 16; ++rr) acc[rr] = 0.f;
#pragma unroll
        for (int g = 0; g < 8; ++g) {
            float k[16];
            decode16(w[g], k);
#pragma unroll
            for (int rr = 0; rr < 16; ++rr) {
                if (r0 + rr < rows) {
                    float p = 0.f;
#pragma unroll
                    for (int c = 0; c < 16; ++c) p = fmaf(qs[r0 + rr][g * 16 + c], k[c], p);
                    acc[rr] = fmaf(p, scl[g], acc[rr]);
                }
            }
        }
#pragma unroll
        for (int rr = 0; rr < 16; ++rr) {
            if (r0 + rr < rows) {
                const int qi = (r0 + rr) / nkv;
                const int pos = kv_len - q_len + qi;
                float v = j <= pos ? acc[rr] : -CUDART_INF_F;
                v = warp_max(v);
                if ((t & 31) == 0) red[t / 32][r0 + rr] = v;
            }
        }
    }
    __syncthreads();
    for (int r = t; r < rows; r += 128) {
        const float m = fmaxf(fmaxf(red[0][r], red[1][r]), fmaxf(red[2][r], red[3][r]));
        scores[((std::size_t)s * rows + r) * max_blocks + b] = m;
    }
}

// ---- Keyed 16-bit top-k (msa.md section 3): CTA per (request, query, index head).
__global__ void __launch_bounds__(256) topk_kernel(const float* scores, const int* seq_lens, int max_blocks, int q_len,
                                                   int nkv, int topk, int* topk_out) {
    __shared__ std::uint32_t keys[8192];
    __shared__ float rmin[8], rmax[8];
    __shared__ std::uint32_t rkey[8];
    const int row = blockIdx.x;  // (s * q_len + qi) * nkv + g
    const int s = row / (q_len * nkv), qi = (row / nkv) % q_len;
    const int t = threadIdx.x;
    const int pos = seq_lens[s] - q_len + qi;
    int* out = topk_out + (std::size_t)row * topk;
    if (pos < 0) {
        for (int i = t; i < topk; i += 256) out[i] = -1;
        return;
    }
    const int local = pos / kBlock;
    if (local + 1 <= topk) {
        for (int i = t; i < topk; i += 256) out[i] = i <= local ? i : -1;
        return;
    }
    const float* sc = scores + (std::size_t)row * max_blocks;
    float mn = CUDART_INF_F, mx = -CUDART_INF_F;
    for (int i = t; i < local; i += 256) {
        mn = fminf(mn, sc[i]);
        mx = fmaxf(mx, sc[i]);
    }
    mn = -warp_max(-mn);
    mx = warp_max(mx);
    if ((t & 31) == 0) { rmin[t / 32] = mn; rmax[t / 32] = mx; }
    __syncthreads();
    mn = rmin[0]; mx = rmax[0];
    for (int i = 1; i < 8; ++i) { mn = fminf(mn, rmin[i]); mx = fmaxf(mx, rmax[i]); }
    float scale = 65534.0f / (mx - mn);
    if (!isfinite(scale)) scale = 0.f;
    const float bias = fmaf(-mn, scale, 1.5f);
    for (int i = t; i < local; i += 256) {
        float f = fmaf(sc[i], scale, bias);
        f = fminf(fmaxf(f, 0.f), 65535.f);
        const std::uint32_t q = (std::uint32_t)f;
        keys[i] = (q << 16) | (~(std::uint32_t)i & 0xFFFFu);
    }
    __syncthreads();
    for (int k = 0; k < topk - 1; ++k) {
        std::uint32_t best = 0;
        for (int i = t; i < local; i += 256) best = max(best, keys[i]);
        for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
        if ((t & 31) == 0) rkey[t / 32] = best;
        __syncthreads();
        best = rkey[0];
        for (int i = 1; i < 8; ++i) best = max(best, rkey[i]);
        const int id = (int)(~best & 0xFFFFu);
        if (t == 0) { out[k] = id; keys[id] = 0; }
        __syncthreads();
    }
    if (t == 0) out[topk - 1] = local;
}

// ---- Sparse attention over one selected page: CTA = (request*query, kv head, slot); thread = token / dim.
template <int G>
__global__ void __launch_bounds__(128) attn_page_kernel(const std::uint8_t* q, const std::uint8_t* k_cache,
                                                        const std::uint8_t* v_cache, const int* page_table,
                                                        const int* seq_lens, const int* topk_idx, int max_blocks,
                                                        int q_len, int nkv, int topk, float* part_o, float* part_lse) {
    __shared__ float qs[G][kHeadDim];
    __shared__ float ps[G][kBlock];
    __shared__ float red[4][G];
    const int bq = blockIdx.x, h = blockIdx.y, slot = blockIdx.z, t = threadIdx.x;
    const int s = bq / q_len, qi = bq % q_len;
    const int pos = seq_lens[s] - q_len + qi;
    const int blk = topk_idx[((std::size_t)bq * nkv + h) * topk + slot];
    const std::size_t pbase = ((std::size_t)bq * nkv + h) * topk + slot;
    float* po = part_o + pbase * G * kHeadDim;
    float* pl = part_lse + pbase * G;
    if (blk < 0 || pos < 0) {
        for (int i = t; i < G * kHeadDim; i += 128) po[i] = 0.f;
        if (t < G) pl[t] = -CUDART_INF_F;
        return;
    }
    const int nq = G * nkv;
    for (int i = t; i < G * kHeadDim; i += 128)
        qs[i / kHeadDim][i % kHeadDim] = e4m3_dec(q[((std::size_t)bq * nq + h * G) * kHeadDim + i]);
    const int page = page_table[(std::size_t)s * max_blocks + blk];
    const std::uint8_t* krec = k_cache + ((std::size_t)page * nkv + h) * kPageHeadBytes;
    const std::uint8_t* vrec = v_cache + ((std::size_t)page * nkv + h) * kPageHeadBytes;
    uint2 w[8];
    float scl[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        w[g] = reinterpret_cast<const uint2*>(krec + t * 64)[g];
        scl[g] = e4m3_dec(krec[kBlock * 64 + t * 8 + g]);
    }
    __syncthreads();
    float sc[G];
#pragma unroll
    for (int hh = 0; hh < G; ++hh) sc[hh] = 0.f;
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        float k[16];
        decode16(w[g], k);
#pragma unroll
        for (int hh = 0; hh < G; ++hh) {
            float p = 0.f;
#pragma unroll
            for (int c = 0; c < 16; ++c) p = fmaf(qs[hh][g * 16 + c], k[c], p);
            sc[hh] = fmaf(p, scl[g], sc[hh]);
        }
    }
    const bool visible = blk * kBlock + t <= pos;
    const float softmax_scale = 0.08838834764831845f;  // 1/sqrt(128)
#pragma unroll
    for (int hh = 0; hh < G; ++hh) {
        sc[hh] = visible ? sc[hh] * softmax_scale : -CUDART_INF_F;
        const float m = warp_max(sc[hh]);
        if ((t & 31) == 0) red[t / 32][hh] = m;
    }
    __syncthreads();
    float mrow[G];
#pragma unroll
    for (int hh = 0; hh < G; ++hh) mrow[hh] = fmaxf(fmaxf(red[0][hh], red[1][hh]), fmaxf(red[2][hh], red[3][hh]));
    __syncthreads();
#pragma unroll
    for (int hh = 0; hh < G; ++hh) {
        const float p = visible ? __expf(sc[hh] - mrow[hh]) : 0.f;
        ps[hh][t] = p;
        const float sum = warp_sum(p);
        if ((t & 31) == 0) red[t / 32][hh] = sum;
    }
    __syncthreads();
    // PV: thread t = output dim d.
    const int d = t;
    float o[G];
#pragma unroll
    for (int hh = 0; hh < G; ++hh) o[hh] = 0.f;
    const int last = min(kBlock - 1, pos - blk * kBlock);
    for (int j = 0; j <= last; ++j) {
        const unsigned byte = vrec[j * 64 + d / 2];
        const float vv = e2m1_dec((d & 1) ? byte >> 4 : byte & 0xFu) * e4m3_dec(vrec[kBlock * 64 + j * 8 + d / 16]);
#pragma unroll
        for (int hh = 0; hh < G; ++hh) o[hh] = fmaf(ps[hh][j], vv, o[hh]);
    }
#pragma unroll
    for (int hh = 0; hh < G; ++hh) {
        const float sum = red[0][hh] + red[1][hh] + red[2][hh] + red[3][hh];
        po[hh * kHeadDim + d] = o[hh] / sum;
        if (t == 0) pl[hh] = mrow[hh] + logf(sum);
    }
}

// ---- LSE merge of the per-page partials: CTA = (request*query, q head); thread = dim.
__global__ void __launch_bounds__(128) combine_kernel(const float* part_o, const float* part_lse, int nq, int nkv,
                                                      int topk, float* out) {
    const int bq = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
    const int G = nq / nkv, h = head / G, hh = head % G;
    const std::size_t base = ((std::size_t)bq * nkv + h) * topk;
    float m = -CUDART_INF_F;
    for (int s = 0; s < topk; ++s) m = fmaxf(m, part_lse[(base + s) * G + hh]);
    float acc = 0.f, den = 0.f;
    if (m != -CUDART_INF_F) {
        for (int s = 0; s < topk; ++s) {
            const float l = part_lse[(base + s) * G + hh];
            if (l == -CUDART_INF_F) continue;
            const float w = __expf(l - m);
            den += w;
            acc = fmaf(w, part_o[((base + s) * G + hh) * kHeadDim + d], acc);
        }
    }
    out[((std::size_t)bq * nq + head) * kHeadDim + d] = den > 0.f ? acc / den : 0.f;
}

}  // namespace

void kv_insert(const KvInsertArgs& a, cudaStream_t stream) {
    const int warps = a.num_tokens * (2 * a.num_kv_heads + 1);
    if (warps == 0) return;
    kv_insert_kernel<<<(warps + 7) / 8, 256, 0, stream>>>(a);
    detail::check(cudaGetLastError());
}

namespace detail {

void launch_simt_indexer(const MsaDecodePlan& p, const MsaDecodeArgs& a, float* scores, cudaStream_t stream) {
    const int nkv = p.geo.num_kv_heads, bq = p.batch * p.q_len;
    index_score_kernel<<<dim3(p.max_blocks, p.batch), 128, 0, stream>>>(a.iq, a.ik_cache, a.page_table, a.seq_lens,
                                                                         p.max_blocks, p.q_len, nkv, scores);
    topk_kernel<<<bq * nkv, 256, 0, stream>>>(scores, a.seq_lens, p.max_blocks, p.q_len, nkv, p.geo.topk, a.topk_out);
    check(cudaGetLastError());
}

void launch_simt_attention(const MsaDecodePlan& p, const MsaDecodeArgs& a, float* po, float* pl, cudaStream_t stream) {
    const int nkv = p.geo.num_kv_heads, nq = p.geo.num_q_heads, G = nq / nkv, bq = p.batch * p.q_len;
    const dim3 grid(bq, nkv, p.geo.topk);
#define MSA_ATTN(GG)                                                                                               \
    attn_page_kernel<GG><<<grid, 128, 0, stream>>>(a.q, a.k_cache, a.v_cache, a.page_table, a.seq_lens, a.topk_out, \
                                                   p.max_blocks, p.q_len, nkv, p.geo.topk, po, pl)
    switch (G) {
        case 1: MSA_ATTN(1); break;
        case 2: MSA_ATTN(2); break;
        case 4: MSA_ATTN(4); break;
        case 8: MSA_ATTN(8); break;
        default: MSA_ATTN(16); break;
    }
#undef MSA_ATTN
    combine_kernel<<<dim3(bq, nq), 128, 0, stream>>>(po, pl, nq, nkv, p.geo.topk, a.out);
    check(cudaGetLastError());
}

}  // namespace detail
}  // namespace msa::cuda
