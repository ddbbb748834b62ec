// Tensor-core MSA decode for Hopper (mma.sync m16n8k16, FP16 operands, FP32 accumulation): the indexer with the
// keyed top-k fused at its end, and the GQA-packed sparse attention with the split-KV merge fused at its end.
// Layouts and the host API: msa_decode.h. Design notes and measurements: docs/cuda-notes.md.
//
// Exact dequantisation without subnormal MMA operands in practice: an E2M1 nibble is turned into FP16 bits by
// shifts and masks (value e2m1 * 2^-14), then one HMUL2 by (scale * 2^7) gives e2m1 * scale * 2^-7 exactly (all
// such products are multiples of 2^-24); queries are E4M3 * 2^7 in FP16 (exact, <= 57344), so each MMA product is
// q * e2m1 * scale with no rounding. Within each MMA the reduction index is permuted freely (same permutation on
// both operands): a thread's 32-bit load of 8 nibbles feeds two k16 steps directly.
#include "msa_decode.h"
#include "msa_decode_internal.h"
#include "msa_device.cuh"

#include <algorithm>
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include <type_traits>
#include <utility>

namespace msa::cuda {
namespace {

constexpr int kWarps = 4;                        // both kernels: 128 threads
namespace cg = cooperative_groups;
using namespace detail;  // device helpers of msa_device.cuh

// Shared-memory image of R token rows of a page (R = 128, or a part of a page): the R x 64-byte nibble rows with
// their four 16-byte chunks XOR-swizzled by (row >> 1) & 3 (conflict-free fragment loads), then the R x 8 scale
// bytes unchanged. Every fragment load of a thread sees the same swizzle (its rows are r + multiples of 8), so the
// offsets below are per-thread constants.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) { return row * 64 + (((chunk ^ (row >> 1)) & 3) << 4); }
// Per-lane offsets of the four 16-byte chunks of its key rows in a swizzled image (see swizzled_chunk).
__device__ __forceinline__ void chunk_offsets(int r, int (&off)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) off[j] = ((j ^ (r >> 1)) & 3) << 4;
}
__device__ __forceinline__ std::uint32_t lds32(const unsigned char* p) { return *reinterpret_cast<const std::uint32_t*>(p); }
__device__ __forceinline__ uint2 lds64(const unsigned char* p) { return *reinterpret_cast<const uint2*>(p); }
// Copies rows [row0, row0 + R) of a 9216-byte page record (R a multiple of 32) into the image at dst with n_thr
// threads (thread index i): 16-byte chunks with per-thread constant offsets.
__device__ __forceinline__ void copy_rows_async(unsigned char* dst, const unsigned char* rec, int row0, int R, int i,
                                                int n_thr) {
    const int step_rows = n_thr / 4;  // rows covered by one pass of all threads
    const int d0 = swizzled_chunk(i >> 2, i & 3), s0 = row0 * 64 + i * 16;
    for (int k = 0; k < R / step_rows; ++k) cp_async16(dst + d0 + k * step_rows * 64, rec + s0 + k * step_rows * 64);
    for (int q = i; q < R / 2; q += n_thr) cp_async16(dst + R * 64 + q * 16, rec + kBlock * 64 + row0 * 8 + q * 16);
}

// Key scales (8 bytes of one token) for the thread's four 32-channel chunks (group 2*gp + (c >> 1)), as f16x2
// (s*2^7, s*2^7).
__device__ __forceinline__ void key_scales(const unsigned char* sc8, int c, std::uint32_t (&s)[4]) {
    const uint2 sc = lds64(sc8);
    const std::uint32_t sel = (c & 2) ? 0x31u : 0x20u;
    const std::uint32_t h01 = hmul2(e4m3x2_to_h2(prmt(sc.x, 0, sel)), kH2x128);
    const std::uint32_t h23 = hmul2(e4m3x2_to_h2(prmt(sc.y, 0, sel)), kH2x128);
    s[0] = prmt(h01, h01, 0x1010);
    s[1] = prmt(h01, h01, 0x3232);
    s[2] = prmt(h23, h23, 0x1010);
    s[3] = prmt(h23, h23, 0x3232);
}
// Query fragment halves for one 32-channel chunk: 8 E4M3 bytes (channels 8c..8c+7 of the chunk) -> the f16x2 pairs
// (0,4), (1,5), (2,6), (3,7), each times 2^7. Pairs (0,4),(1,5) feed k-step j=0, (2,6),(3,7) k-step j=1.
__device__ __forceinline__ void query_pairs(uint2 u, std::uint32_t (&p)[4]) {
    const std::uint32_t w01 = prmt(u.x, u.y, 0x5140), w23 = prmt(u.x, u.y, 0x7362);
    p[0] = hmul2(e4m3x2_to_h2(w01), kH2x128);
    p[1] = hmul2(e4m3x2_to_h2(w01 >> 16), kH2x128);
    p[2] = hmul2(e4m3x2_to_h2(w23), kH2x128);
    p[3] = hmul2(e4m3x2_to_h2(w23 >> 16), kH2x128);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* a) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
    return v;
}
__device__ __forceinline__ void st_release(unsigned* a, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(a), "r"(v) : "memory");
}

// Phase timeline (msa_decode.h, set_decode_trace): thread 0 of the CTA records %globaltimer. trace_barrier_event
// first waits for the whole CTA; both compile to nothing without MSA_DECODE_TRACE.
#ifdef MSA_DECODE_TRACE
__device__ __forceinline__ void trace_event(unsigned long long* t, int ev) {
    if (t == nullptr || threadIdx.x != 0) return;
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)::"memory");
    atomicMin(t + ev, now);
    atomicMax(t + kDecodeTraceEvents + ev, now);
}
__device__ __forceinline__ void trace_barrier_event(unsigned long long* t, int ev) {
    __syncthreads();
    trace_event(t, ev);
}
#else
__device__ __forceinline__ void trace_event(unsigned long long*, int) {}
__device__ __forceinline__ void trace_barrier_event(unsigned long long*, int) {}
#endif

// ---------------------------------------------------------------- indexer + keyed top-k
struct IdxParams {
    const std::uint8_t* iq; const std::uint8_t* ik_cache; const int* page_table; const int* seq_lens;
    float* scores; int* sel_pages; int* topk_out; unsigned* counters;
    const std::uint8_t* k_cache; const std::uint8_t* v_cache;  // only for the L2 prefetch of the selected pages
    unsigned* work;  // persistent mode: [0] next work unit, [1] CTAs done (both left at zero by the last CTA)
    unsigned* ready; // per request: set (release) once its top-k rows are written; null = the attention uses the
                     // grid dependency (griddepcontrol.wait) instead
    int max_blocks, q_len, nkv, rows, topk, nt_total, items_per_cta, parts, chunks, batch;
    bool prefetch, persistent;
    Mul mul;
    bool wgmma;  // FP8 indexer on wgmma (run_wg_items) instead of mma.sync
    unsigned long long* trace;  // phase timeline (set_decode_trace), null when off
    bool attn_topk;  // the attention CTAs run the top-k (AttnParams::scores); the last CTA only publishes the scores
    bool early_trigger;  // launch the dependents right after the grid-dependency wait, not after the scores
};

// The block maxima of index row `unit` (request s, row r: unit = s * rows + r): max_blocks * parts floats.
__device__ __forceinline__ float* row_scores(float* scores, std::size_t unit, int max_blocks, int parts) {
    return scores + unit * max_blocks * parts;
}
// Where the indexer stores row `row`'s maximum over work item `item` (block item / parts, page part item % parts).
__device__ __forceinline__ float* score_slot(const IdxParams& p, int s, int row, int item) {
    return row_scores(p.scores, static_cast<std::size_t>(s) * p.rows + row, p.max_blocks, p.parts) + item;
}
// Starts the copy of token rows [part * R, part * R + R) of index-key page `page` into a warp's image (the item of
// a warp: R = kBlock / parts rows).
__device__ __forceinline__ void copy_index_part(const IdxParams& p, unsigned char* dst, int page, int part, int R,
                                                int lane) {
    copy_rows_async(dst, p.ik_cache + static_cast<std::size_t>(page) * kPageHeadBytes, part * R, R, lane, 32);
}
// Lanes 0-3 store the block maxima of NT n-tiles of 8 index rows from row0 (MMA layout: lane l holds rows 2l, 2l + 1).
template <int NT>
__device__ __forceinline__ void store_block_maxima(const IdxParams& p, int s, int item, int lane, int row0,
                                                   const float (&mx)[NT][2]) {
    if (lane >= 4) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int row = row0 + nt * 8 + 2 * lane + e;
            if (row < p.rows) *score_slot(p, s, row, item) = mx[nt][e];
        }
}

// Prefetch into L2 the K and V records of every kv head of a selected page (the attention's first loads).
__device__ __forceinline__ void prefetch_page_kv(const IdxParams& p, int page) {
    if (!p.prefetch || page < 0) return;
    for (int h = 0; h < p.nkv; ++h) {
        const std::size_t rec = (static_cast<std::size_t>(page) * p.nkv + h) * kPageHeadBytes;
        prefetch_l2_bulk(p.k_cache + rec, kPageHeadBytes);
        prefetch_l2_bulk(p.v_cache + rec, kPageHeadBytes);
    }
}

// The A fragments of key rows t0 (word x0) and t0 + 8 (word x1) for the two k16 steps of one 32-channel chunk, keys
// dequantised exactly to FP16 (e2m1 * scale * 2^-7; s0 / s1: the chunk's key_scales of the two rows).
__device__ __forceinline__ void key_afrags(std::uint32_t x0, std::uint32_t x1, std::uint32_t s0, std::uint32_t s1,
                                           const Mul& mul, std::uint32_t (&a0)[4], std::uint32_t (&a1)[4]) {
    std::uint32_t k0[4], k1[4];
    fp4x8(x0, mul, k0);
    fp4x8(x1, mul, k1);
    a0[0] = hmul2(k0[0], s0);
    a0[1] = hmul2(k1[0], s1);
    a0[2] = hmul2(k0[1], s0);
    a0[3] = hmul2(k1[1], s1);
    a1[0] = hmul2(k0[2], s0);
    a1[1] = hmul2(k1[2], s1);
    a1[2] = hmul2(k0[3], s0);
    a1[3] = hmul2(k1[3], s1);
}
// Block maxima over the nmt m-tiles (16 tokens each) of an image of 16*nmt rows, for NT n-tiles (8 index rows
// each) of query fragments bf (this lane's uint2 per (n-tile, chunk, k-step)). Keys are the MMA M dimension, index
// rows the N dimension.
template <int NT>
__device__ __forceinline__ void index_rows(const unsigned char* img, const uint2* bf, int lane, int nmt, const Mul& mul,
                                          float (&mx)[NT][2]) {
    const int r = lane >> 2, c = lane & 3;
    std::uint32_t b[NT][4][2][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int gp = 0; gp < 4; ++gp)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const uint2 v = bf[((nt * 4 + gp) * 2 + j) * 32 + lane];
                b[nt][gp][j][0] = v.x;
                b[nt][gp][j][1] = v.y;
            }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx[nt][0] = mx[nt][1] = -CUDART_INF_F;
    const unsigned char* data = img + r * 64 + 4 * c;                // row r of m-tile 0
    const unsigned char* scl = img + nmt * 16 * 64 + r * 8;          // its scales
    int off[4];
    chunk_offsets(r, off);
#pragma unroll 2
    for (int mt = 0; mt < nmt; ++mt) {
        const unsigned char* d0 = data + mt * 1024;  // rows t0 = 16 mt + r and t1 = t0 + 8 (+512 bytes)
        std::uint32_t s0[4], s1[4];
        key_scales(scl + mt * 128, c, s0);
        key_scales(scl + mt * 128 + 64, c, s1);
        float d[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) d[nt][0] = d[nt][1] = d[nt][2] = d[nt][3] = 0.f;
#pragma unroll
        for (int gp = 0; gp < 4; ++gp) {
            std::uint32_t a0[4], a1[4];
            key_afrags(lds32(d0 + off[gp]), lds32(d0 + 512 + off[gp]), s0[gp], s1[gp], mul, a0, a1);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma16816(d[nt], a0, b[nt][gp][0][0], b[nt][gp][0][1]);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma16816(d[nt], a1, b[nt][gp][1][0], b[nt][gp][1][1]);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            mx[nt][0] = fmaxf(mx[nt][0], fmaxf(d[nt][0], d[nt][2]));
            mx[nt][1] = fmaxf(mx[nt][1], fmaxf(d[nt][1], d[nt][3]));
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) mx[nt][e] = fmaxf(mx[nt][e], __shfl_xor_sync(0xffffffffu, mx[nt][e], o));
}

// ---- FP8 variant of the one-query indexer (msa.md section 5: "applies the key scales after the MMA") ----
// mma.sync m16n8k32 with E4M3 operands: A = raw E2M1 codes re-encoded as E4M3 (exactly e2m1 * 2^-6: a bit move, no
// table), B = the E4M3 index queries as stored. The 8 N columns are (head h, half) pairs, col 2h + half: half 0
// holds the query's channels of the even NVFP4 group of each k32 step, half 1 those of the odd group, zeros
// elsewhere, so the two columns of a head return the two groups' dot products separately and each is multiplied by
// its own key scale in FP32 (FFMA). Products are exact; the sums of 16 products are the tensor core's FP32
// accumulation. Lane (g, c) of a warp scores keys g and g + 8 of each m-tile for head c.
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}
// E2M1 nibbles of x as E4M3 bytes (value e2m1 * 2^-6): the low nibble of each byte (even channels), the high one.
__device__ __forceinline__ std::uint32_t e2m1_even_as_e4m3(std::uint32_t x) {
    return ((x << 4) & 0x80808080u) | ((x << 2) & 0x1C1C1C1Cu);
}
__device__ __forceinline__ std::uint32_t e2m1_odd_as_e4m3(std::uint32_t x) {
    return (x & 0x80808080u) | ((x >> 2) & 0x1C1C1C1Cu);
}
constexpr int kFp8TabStride = 12;  // floats per row of the scale table (48 B: conflict-free 16-byte loads)
// The 8 group scales of key row `row` from the scale table.
__device__ __forceinline__ void load_row_scales(const float* tab, int row, float (&sc)[8]) {
    const float4* t = reinterpret_cast<const float4*>(tab + row * kFp8TabStride);
    const float4 a = t[0], b = t[1];
    sc[0] = a.x; sc[1] = a.y; sc[2] = a.z; sc[3] = a.w;
    sc[4] = b.x; sc[5] = b.y; sc[6] = b.z; sc[7] = b.w;
}
// acc0/acc1 (key rows g, g + 8) += the two groups' dot products d of k32 step j, each times its key scale.
__device__ __forceinline__ void add_scaled_groups(const float (&s0)[8], const float (&s1)[8], int j, const float (&d)[4],
                                                  float& acc0, float& acc1) {
    acc0 = fmaf(s0[2 * j], d[0], acc0);
    acc0 = fmaf(s0[2 * j + 1], d[1], acc0);
    acc1 = fmaf(s1[2 * j], d[2], acc1);
    acc1 = fmaf(s1[2 * j + 1], d[3], acc1);
}
// The warp's key-scale table for an image of R rows: tab[row][group] = the E4M3 scale as FP32 (exact: two scales per
// conversion to f16x2, then each half widened; 12 instructions per row where moving the bits into a float and
// rescaling took 24).
__device__ __forceinline__ void fp8_scale_table(const unsigned char* img, int R, float* tab, int lane) {
    for (int row = lane; row < R; row += 32) {
        const uint2 w = lds64(img + R * 64 + row * 8);
        const std::uint32_t h[4] = {e4m3x2_to_h2(w.x), e4m3x2_to_h2(w.x >> 16), e4m3x2_to_h2(w.y), e4m3x2_to_h2(w.y >> 16)};
        float f[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            f[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(h[k] & 0xFFFFu)));
            f[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(h[k] >> 16)));
        }
        float4* t = reinterpret_cast<float4*>(tab + row * kFp8TabStride);
        t[0] = make_float4(f[0], f[1], f[2], f[3]);
        t[1] = make_float4(f[4], f[5], f[6], f[7]);
    }
}
// This lane's B fragments: bq[j] for k32 step j (channels 32j..32j+31 = groups 2j, 2j+1).
__device__ __forceinline__ void fp8_query_frags(const std::uint8_t* iq_req, int rows, int lane,
                                                std::uint32_t (&bq)[4][2]) {
    const int g = lane >> 2, c = lane & 3, head = g >> 1, half = g & 1;
    const bool live = half == (c >> 1) && head < rows;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint2 u = make_uint2(0u, 0u);
        if (live) u = *reinterpret_cast<const uint2*>(iq_req + head * kHeadDim + 32 * j + 8 * c);
        bq[j][0] = prmt(u.x, u.y, 0x6420u);  // channels 32j + 8c + {0, 2, 4, 6}
        bq[j][1] = prmt(u.x, u.y, 0x7531u);  // {1, 3, 5, 7}
    }
}
// Block maxima (head c = lane & 3, times 2^-62) over the nmt m-tiles of an image, FP8 path.
__device__ __forceinline__ float index_rows_fp8(const unsigned char* img, const float* tab,
                                                const std::uint32_t (&bq)[4][2], int lane, int nmt) {
    const int r = lane >> 2, c = lane & 3;
    const unsigned char* data = img + r * 64 + 4 * c;
    int off[4];
    chunk_offsets(r, off);
    float mx = -CUDART_INF_F;
#pragma unroll 2
    for (int mt = 0; mt < nmt; ++mt) {
        const unsigned char* d0 = data + mt * 1024;
        float s0[8], s1[8];
        load_row_scales(tab, mt * 16 + r, s0);
        load_row_scales(tab, mt * 16 + r + 8, s1);
        float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const std::uint32_t x0 = lds32(d0 + off[j]), x1 = lds32(d0 + 512 + off[j]);
            const std::uint32_t a[4] = {e2m1_even_as_e4m3(x0), e2m1_even_as_e4m3(x1), e2m1_odd_as_e4m3(x0),
                                        e2m1_odd_as_e4m3(x1)};
            float d[4];
            mma_e4m3_16832(d, a, bq[j][0], bq[j][1]);
            add_scaled_groups(s0, s1, j, d, acc0, acc1);
        }
        mx = fmaxf(mx, fmaxf(acc0, acc1));
    }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    return mx;
}

__device__ __forceinline__ void load_scores(const float* sc, int base, int n, int parts, int lane, float (&v)[16]) {
    if (parts == 4) load_score_vectors<float4>(sc, base, n, lane, v);
    else if (parts == 2) load_score_vectors<float2>(sc, base, n, lane, v);
    else load_score_vectors<float>(sc, base, n, lane, v);
}

// Keyed top-k of one index row (msa.md section 3) by one warp: 16-bit quantised keys, per-lane sorted top-15
// lists, then k-1 rounds of warp max. Lane k < topk gets the k-th pick (logical block id, the local block last) and
// the physical page it maps to, -1 for none; lanes >= topk get -1. sc: the row's block maxima (`parts` per block,
// row_scores), pt: the request's page-table row, pos: the query's position. trace: row 0 of the indexer only.
struct TopkPick {
    int blk, page;
};
__device__ TopkPick topk_pick(const float* sc, int parts, const int* pt, int pos, int topk, int lane,
                              unsigned long long* trace) {
    if (pos < 0) return {-1, -1};
    const int local = pos / kBlock;
    if (local + 1 <= topk) {
        const bool on = lane <= local;  // (local < topk <= 16)
        return {on ? lane : -1, on ? pt[lane] : -1};
    }
    const int n = local;  // history blocks 0..local-1, all complete and visible
    float mn = CUDART_INF_F, mx = -CUDART_INF_F;
    float v0[16];  // the first 512 blocks stay in registers for the second pass
    int pt0[16];   // and their page-table entries (local block included), loaded in the same round trip
#pragma unroll
    for (int k = 0; k < 16; ++k) pt0[k] = pt[min(lane + 32 * k, local)];  // all issued first (read only for picks)
    load_scores(sc, 0, n, parts, lane, v0);
    for (int base = 0; base < n; base += 512) {
        float v[16];
        if (base == 0) {
#pragma unroll
            for (int k = 0; k < 16; ++k) v[k] = v0[k];
        } else {
            load_scores(sc, base, n, parts, lane, v);
        }
        chunk_min_max(v, base, n, lane, mn, mx);
    }
    mn = warp_min(mn);
    mx = warp_max(mx);
    trace_event(trace, kTrTopkLoaded);
    const KeyedQuant kq = keyed_quant(mn, mx);
    std::uint32_t top[15];
#pragma unroll
    for (int j = 0; j < 15; ++j) top[j] = 0;
    for (int base = 0; base < n; base += 512) {  // second pass over the (L2-resident) scores
        float v[16];
        if (base == 0) {
#pragma unroll
            for (int k = 0; k < 16; ++k) v[k] = v0[k];
        } else {
            load_scores(sc, base, n, parts, lane, v);
        }
        if (base == 0) first_keyed_chunk(top, v, n, lane, kq);  // into the empty list: no merge needed
        else merge_keyed_chunk(top, v, base, n, lane, kq);
    }
    trace_event(trace, kTrTopkInserted);
    const int mine = top15_pick(top, topk, lane, local);  // lane k keeps the k-th pick; lane topk-1 the local block
    int pg = -1;  // the pick's page from the registers of lane mine % 32 (blocks < 512), else from the page table
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const int t = __shfl_sync(0xffffffffu, pt0[k], mine & 31);
        if (k == (mine >> 5)) pg = t;
    }
    if (lane >= topk) return {-1, -1};
    if (mine >= 512) pg = pt[mine];
    return {mine, pg};
}
// The indexer's top-k of one row: picks to topk_out and sel_pages (and the optional L2 prefetch).
__device__ void topk_row(const IdxParams& p, int s, int row, int kv_len, int lane) {
    const int pos = kv_len - p.q_len + row / p.nkv;
    const TopkPick pk = topk_pick(score_slot(p, s, row, 0), p.parts, p.page_table + static_cast<std::size_t>(s) * p.max_blocks,
                                  pos, p.topk, lane, row == 0 ? p.trace : nullptr);
    if (lane < p.topk) {
        const std::size_t o = (static_cast<std::size_t>(s) * p.rows + row) * p.topk + lane;
        p.topk_out[o] = pk.blk;
        p.sel_pages[o] = pk.page;
        prefetch_page_kv(p, pk.page);
    }
}

// The item loop of the FP8 indexer (one query per request, <= 4 index heads): like index_unit's, plus the per-item
// key-scale table (after the warp's scale table of the first R rows' image; R x 48 bytes per warp).
template <class CopyItem>
__device__ __forceinline__ void run_fp8_items(const IdxParams& p, unsigned char* smem, unsigned char* wbuf, int stage,
                                              int R, int s, int it, int it_end, int lane, int warp,
                                              CopyItem&& copy_item) {
    std::uint32_t bq[4][2];
    fp8_query_frags(p.iq + static_cast<std::size_t>(s) * p.rows * kHeadDim, p.rows, lane, bq);
    float* tab = reinterpret_cast<float*>(smem + kWarps * 2 * stage) + warp * R * kFp8TabStride;
    for (int i = 0; it < it_end; ++i, it += kWarps) {
        if (it + kWarps < it_end) copy_item(wbuf + ((i + 1) & 1) * stage, it + kWarps);
        cp_async_commit();
        cp_async_wait<1>();
        __syncwarp();
        const unsigned char* img = wbuf + (i & 1) * stage;
        fp8_scale_table(img, R, tab, lane);
        __syncwarp();
        const float mx = index_rows_fp8(img, tab, bq, lane, R / 16) * 0x1p6f;  // undo the codes' 2^-6
        if (lane < p.rows) *score_slot(p, s, lane, it) = mx;  // lane c holds head c, and with one query row = head
        __syncwarp();  // the table and this image are reused by the next items
    }
}

// ---- The same FP8 one-query indexer on wgmma (sm_90a), the only FP8 tensor path of Hopper: ptxas lowers the FP8
// mma.sync above to FP16 conversions and FP16 MMAs (docs/cuda-notes.md section 16). One warpgroup = the CTA's 4 warps;
// each warp still streams its own items, and warp w's 16 rows of an m-tile are rows 16w..16w+15 of the M = 64 wgmma
// (A from registers, same per-warp fragment as mma.sync m16n8k32); B = the query columns in shared memory (1 KB,
// K-major, no swizzle: per k32 step two 8 x 16-byte core matrices, 128 bytes apart). The warps run the same number of
// m-tiles (a warp past its last item feeds zeros), since wgmma is a warpgroup instruction.
// D = A B (the accumulator is overwritten: scale-d = 0).
__device__ __forceinline__ void wgmma_e4m3_m64n8k32(float (&d)[4], const std::uint32_t (&a)[4], std::uint64_t desc) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(0)
        : "memory");
}
// Shared-memory matrix descriptor, no swizzle: 128 bytes both between the core matrices along K and along N (only one
// along N exists for N = 8, so the two offsets cannot be confused).
__device__ __forceinline__ std::uint64_t wg_desc(const void* smem_ptr) {
    return wg_desc_noswizzle(smem_ptr, 128, 128);
}
// The query columns for all four k32 steps (1 KB at bq): step j at 256 j, core matrix (k 0-15, k 16-31) at +0/+128,
// column n at 16 n. Column n = (head n >> 1, half n & 1); slot k belongs to thread c = (k & 15) >> 2 of the A
// fragment, i.e. to word 4j + c of a key row (group 2j + (c >> 1)), nibble 2 (k & 3) + (k >> 4).
__device__ __forceinline__ void wg_query_columns(const std::uint8_t* iq_req, int rows, unsigned char* bq, int tid) {
    static_assert(kWarps * 32 * 8 == 1024, "one 8-byte run per thread");
    // Thread tid writes bytes 8 tid .. 8 tid + 7 (1 KB = 128 threads x 8): step j, core, column n and slots
    // k = 16 core + kk0 + t (t < 8, kk0 = 0 or 8), i.e. threads c = kk0 / 4 + t / 4, which belong to half kk0 / 8
    // and hold channels 32 j + 2 kk0 + 2 t + core: every other byte of one 16-byte run of the query row.
    const int e = 8 * tid, j = e >> 8, core = (e >> 7) & 1, n = (e >> 4) & 7, kk0 = e & 15;
    const int head = n >> 1, half = n & 1;
    uint2 out = make_uint2(0u, 0u);
    if (half == (kk0 >> 3) && head < rows) {
        const uint4 u = *reinterpret_cast<const uint4*>(iq_req + head * kHeadDim + 32 * j + 2 * kk0);
        const std::uint32_t sel = core ? 0x7531u : 0x6420u;
        out = make_uint2(prmt(u.x, u.y, sel), prmt(u.z, u.w, sel));
    }
    *reinterpret_cast<uint2*>(bq + e) = out;
    fence_proxy_async_smem();  // generic-proxy writes -> wgmma reads
}
// The warpgroup's item loop: every warp runs the same number of iterations (wgmma is a warpgroup instruction; a warp
// past its last item gets live = false and feeds zeros), each warp double-buffering its own items through cp.async.
// body(image, live, item).
template <class CopyItem, class Body>
__device__ __forceinline__ void warpgroup_item_loop(int it_begin, int it_end, int warp, unsigned char* wbuf, int stage,
                                                    CopyItem&& copy_item, Body&& body) {
    const int n_iter = (it_end - it_begin + kWarps - 1) / kWarps;
    int it = it_begin + warp;
    for (int i = 0; i < n_iter; ++i, it += kWarps) {
        if (it + kWarps < it_end) copy_item(wbuf + ((i + 1) & 1) * stage, it + kWarps);
        cp_async_commit();
        cp_async_wait<1>();
        __syncwarp();
        body(static_cast<const unsigned char*>(wbuf + (i & 1) * stage), it < it_end, it);
        __syncwarp();  // the image (and the scale table) are reused by the warp's next items
    }
}
// R (token rows per item: 128, 64 or 32) is a template parameter so that the m-tile loop, the copies and the scale
// table unroll with immediate offsets; p.parts = kBlock / kR. A warp past its last item decodes whatever its buffer
// holds (finite E4M3 codes, its own accumulator rows only) and stores nothing, so no load needs a predicate.
template <int kR>
__device__ __forceinline__ void run_wg_items(const IdxParams& p, unsigned char* smem, unsigned char* wbuf, const int* pt,
                                             int s, int it_begin, int it_end, int lane, int warp) {
    constexpr int kParts = kBlock / kR, kStage = kR * 72, kMt = kR / 16;
    unsigned char* bq = smem + kWarps * 2 * kStage;  // 1 KB, then the warps' scale tables
    float* tab = reinterpret_cast<float*>(bq + 1024) + warp * kR * kFp8TabStride;
    wg_query_columns(p.iq + static_cast<std::size_t>(s) * p.rows * kHeadDim, p.rows, bq, threadIdx.x);
    __syncthreads();
    const std::uint64_t desc0 = wg_desc(bq);
    const int r = lane >> 2, c = lane & 3;
    int off[4];
    chunk_offsets(r, off);
    auto copy_item = [&](unsigned char* dst, int item) {
        const unsigned u = static_cast<unsigned>(item);
        copy_index_part(p, dst, pt[u / kParts], static_cast<int>(u % kParts), kR, lane);
    };
    warpgroup_item_loop(it_begin, it_end, warp, wbuf, kStage, copy_item, [&](const unsigned char* img, bool live, int it) {
        if (it == it_begin) trace_event(p.trace, kTrIdxFirstImage);  // thread 0: warp 0's first item has arrived
        if (live) fp8_scale_table(img, kR, tab, lane);
        __syncwarp();
        // Each m-tile's 4 wgmmas are waited for before the next m-tile is decoded: the other warpgroups of the SM fill
        // the gap. (A software pipeline that decoded m-tile t + 1 while t's wgmmas ran was 2-3% slower in run F of
        // session 5, docs/cuda-notes.md section 16.)
        float mx = -CUDART_INF_F;
        const unsigned char* row0 = img + r * 64 + 4 * c;
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
            std::uint32_t a[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const std::uint32_t x0 = lds32(row0 + mt * 1024 + off[j]), x1 = lds32(row0 + mt * 1024 + 512 + off[j]);
                a[j][0] = e2m1_even_as_e4m3(x0);
                a[j][1] = e2m1_even_as_e4m3(x1);
                a[j][2] = e2m1_odd_as_e4m3(x0);
                a[j][3] = e2m1_odd_as_e4m3(x1);
            }
            float d[4][4];
            wgmma_fence_regs(d);
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < 4; ++j) wgmma_e4m3_m64n8k32(d[j], a[j], desc0 + static_cast<std::uint64_t>(j * 256 >> 4));
            wgmma_commit();
            wgmma_wait0();
            wgmma_fence_regs(d);
            float s0[8], s1[8];
            load_row_scales(tab, mt * 16 + r, s0);
            load_row_scales(tab, mt * 16 + r + 8, s1);
            float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
            for (int j = 0; j < 4; ++j) add_scaled_groups(s0, s1, j, d[j], acc0, acc1);
            mx = fmaxf(mx, fmaxf(acc0, acc1));
        }
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        if (live && lane < p.rows) *score_slot(p, s, lane, it) = mx * 0x1p6f;  // undo the codes' 2^-6
    });
}

// ---- The 8-query indexer (5-8 queries: 17-32 index rows, one pass) on wgmma m64n32k16 (FP16, A from registers):
// the keys are dequantised exactly to FP16 as in index_rows (e2m1 * scale * 2^-7), the 32 query rows (FP16 x 2^7,
// zero past `rows`) are B in shared memory, K-major without swizzle: per k16 step 1 KB, core matrix (k-half kc, n-octet
// nc) of 8 x 16 bytes at kc * 512 + nc * 128. Descriptor offsets: leading = along K (512), stride = along N (128) (run H
// of session 5: the exchanged assignment faults with an illegal address).
__device__ __forceinline__ std::uint64_t wg16_desc(const void* smem_ptr) {
    return wg_desc_noswizzle(smem_ptr, 512, 128);
}
__device__ __forceinline__ void wgmma_f16_m64n32k16(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t desc,
                                                    int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
        : "memory");
}
// Structured like the one-query run_wg_items (session 18; the first version, session 5, kept whole pages at 2 CTAs per
// SM and was no faster than mma.sync): the rows per item kR are a template parameter (unrolled m-tiles, immediate
// offsets), warps past their last item decode their stale buffer and store nothing (no predicated loads), the kernel
// is capped at 128 registers for 4 CTAs per SM (half pages: 45 KB of shared memory per CTA), the query columns are
// written by one vectorised pass, and with MSA_Q8_PIPE (default) the next m-tile's keys are decoded while this
// m-tile's wgmmas run.
#ifndef MSA_Q8_PIPE
#define MSA_Q8_PIPE 1
#endif
// B of the 8 k16 steps (8 KB at bq), one 16-byte store per (k16 step, k-half): thread tid takes index row
// n = tid & 31 and the 32 channels of group pair gp = tid >> 5. Slot k = 8 kh + 2 c + b of step 2 gp + j holds
// channel 32 gp + 8 c + 2 j + kh + 4 b, i.e. byte 2 j + kh of the row's 32-bit word 2 c + b (of those 32 channels):
// slot pair (2 c, 2 c + 1) is that byte of words 2 c and 2 c + 1.
__device__ __forceinline__ void wq8_query_columns(const std::uint8_t* iq_req, int rows, unsigned char* bq, int tid) {
    static_assert(kWarps * 32 == 128, "one thread per (index row, group pair)");
    const int n = tid & 31, gp = tid >> 5;
    uint4 u0 = make_uint4(0u, 0u, 0u, 0u), u1 = u0;
    if (n < rows) {
        const uint4* src = reinterpret_cast<const uint4*>(iq_req + n * kHeadDim + 32 * gp);
        u0 = src[0];
        u1 = src[1];
    }
    const std::uint32_t w[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    unsigned char* dst = bq + (2 * gp) * 1024 + (n >> 3) * 128 + (n & 7) * 16;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int kh = 0; kh < 2; ++kh) {
            const std::uint32_t b = 2 * j + kh, sel = b | ((b + 4) << 4);  // byte b of each of two words
            std::uint32_t h[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) h[i] = hmul2(e4m3x2_to_h2(prmt(w[2 * i], w[2 * i + 1], sel)), kH2x128);
            *reinterpret_cast<uint4*>(dst + j * 1024 + kh * 512) = make_uint4(h[0], h[1], h[2], h[3]);
        }
    fence_proxy_async_smem();
}
// The block maxima of an m64n32 item (lane (r, c) holds mx[nt][e], the maximum over its key rows of column 8 nt + 2 c +
// e) reduced over the 8 lanes of each c by a transposed butterfly: each step halves the values a lane holds (it keeps
// one half and sends the other), so after the xor-16, -8 and -4 steps lane (r, c) holds the full maximum of value r,
// i.e. of column 8 (r >> 1) + 2 c + (r & 1), and every lane stores one score: 7 shuffles, 7 maxima and 14 selects
// where a shuffle of all 8 values per step took 24 and 24, and 32 stores by 4 lanes (session 18). Same maxima.
__device__ __forceinline__ void store_block_maxima_t(const IdxParams& p, int s, int item, int lane, bool live,
                                                     const float (&mx)[4][2]) {
    const bool b4 = (lane & 16) != 0, b3 = (lane & 8) != 0, b2 = (lane & 4) != 0;
    float w[4], x[2];
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // value k + 4 b4 (value index v = 2 nt + e)
        const float lo = mx[k >> 1][k & 1], hi = mx[(k + 4) >> 1][k & 1];
        w[k] = fmaxf(b4 ? hi : lo, __shfl_xor_sync(0xffffffffu, b4 ? lo : hi, 16));
    }
#pragma unroll
    for (int k = 0; k < 2; ++k)  // value k + 2 b3 + 4 b4
        x[k] = fmaxf(b3 ? w[k + 2] : w[k], __shfl_xor_sync(0xffffffffu, b3 ? w[k] : w[k + 2], 8));
    const float y = fmaxf(b2 ? x[1] : x[0], __shfl_xor_sync(0xffffffffu, b2 ? x[0] : x[1], 4));  // value r
    const int r = lane >> 2, col = 8 * (r >> 1) + 2 * (lane & 3) + (r & 1);
    if (live && col < p.rows) *score_slot(p, s, col, item) = y;
}
template <int kR>
__device__ __forceinline__ void run_wq8_items(const IdxParams& p, unsigned char* smem, unsigned char* wbuf,
                                              const int* pt, int s, int it_begin, int it_end, int lane, int warp) {
    constexpr int kParts = kBlock / kR, kStage = kR * 72, kMt = kR / 16;
    unsigned char* bq = smem + kWarps * 2 * kStage;  // 8 KB
    wq8_query_columns(p.iq + static_cast<std::size_t>(s) * p.rows * kHeadDim, p.rows, bq, threadIdx.x);
    __syncthreads();
    const std::uint64_t desc0 = wg16_desc(bq);
    const int r = lane >> 2, c = lane & 3;
    int off[4];
    chunk_offsets(r, off);
    auto copy_item = [&](unsigned char* dst, int item) {
        const unsigned u = static_cast<unsigned>(item);
        copy_index_part(p, dst, pt[u / kParts], static_cast<int>(u % kParts), kR, lane);
    };
    warpgroup_item_loop(it_begin, it_end, warp, wbuf, kStage, copy_item, [&](const unsigned char* img, bool live, int it) {
        const unsigned char* row0 = img + r * 64 + 4 * c;  // key row r of m-tile 0
        const unsigned char* scl = img + kR * 64 + r * 8;   // its scales
        // A of m-tile mt (key rows 16 mt + r and + 8) for the 8 k16 steps: e2m1 * scale * 2^-7 in FP16, exact.
        auto decode_mtile = [&](int mt, std::uint32_t (&a)[8][4]) {
            std::uint32_t s0[4], s1[4];
            key_scales(scl + mt * 128, c, s0);
            key_scales(scl + mt * 128 + 64, c, s1);
#pragma unroll
            for (int gp = 0; gp < 4; ++gp)
                key_afrags(lds32(row0 + mt * 1024 + off[gp]), lds32(row0 + mt * 1024 + 512 + off[gp]), s0[gp], s1[gp],
                           p.mul, a[2 * gp], a[2 * gp + 1]);
        };
        auto issue = [&](float (&d)[16], const std::uint32_t (&a)[8][4]) {
            wgmma_fence();
#pragma unroll
            for (int t = 0; t < 8; ++t)
                wgmma_f16_m64n32k16(d, a[t], desc0 + static_cast<std::uint64_t>(t * 1024 >> 4), t > 0);
            wgmma_commit();
        };
        float mx[4][2];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) mx[nt][0] = mx[nt][1] = -CUDART_INF_F;
        auto fold = [&](float (&d)[16]) {
#pragma unroll
            for (int e = 0; e < 16; ++e) asm volatile("" : "+f"(d[e])::"memory");  // read only after the wait
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {  // d[4 nt ..]: (row g, col 8 nt + 2c, +1), (row g + 8, same cols)
                mx[nt][0] = fmaxf(mx[nt][0], fmaxf(d[4 * nt], d[4 * nt + 2]));
                mx[nt][1] = fmaxf(mx[nt][1], fmaxf(d[4 * nt + 1], d[4 * nt + 3]));
            }
        };
#if MSA_Q8_PIPE
        std::uint32_t a[2][8][4];
        decode_mtile(0, a[0]);
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
            float d[16];
            issue(d, a[mt & 1]);
            if (mt + 1 < kMt) decode_mtile(mt + 1, a[(mt + 1) & 1]);
            wgmma_wait0();
            wgmma_fence_regs(a[mt & 1]);
            fold(d);
        }
#else
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
            std::uint32_t a[8][4];
            decode_mtile(mt, a);
            float d[16];
            issue(d, a);
            wgmma_wait0();
            wgmma_fence_regs(a);
            fold(d);
        }
#endif
        store_block_maxima_t(p, s, it, lane, live, mx);
    });
}

// CTA = (chunk of items_per_cta work items, request); an item is one of `parts` token ranges of an index-K page
// (parts > 1 only when there are few pages, to spread one page over several warps). Each warp streams its items
// through a two-stage cp.async buffer and writes the block maxima; the last CTA of a request (arrival counter) runs
// the keyed top-k for all its rows and leaves the counter at zero again.
// Work unit (request s, chunk) of the indexer: see index_topk_kernel.
template <int NT, bool FP8, bool Q8>
__device__ __forceinline__ void index_unit(const IdxParams& p, unsigned char* smem, int& s_last, int s, int chunk) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int* pt = p.page_table + static_cast<std::size_t>(s) * p.max_blocks;
    const int it_begin = chunk * p.items_per_cta;
    int it = it_begin + warp;
    // The first item's page-table entry is loaded together with the sequence length (the row has max_blocks
    // entries, so the load is in bounds; the value is used only if the item exists).
    const int lg_parts = p.parts >> 1;  // parts is 1, 2 or 4: shifts instead of divisions by a run-time value
    const int first_page = (it >> lg_parts) < p.max_blocks ? pt[it >> lg_parts] : 0;
    const int kv_len = p.seq_lens[s];
    const int n_hist = kv_len > 0 ? (kv_len - 1) / kBlock : 0;
    const int it_end = min(n_hist * p.parts, it_begin + p.items_per_cta);
    const int R = kBlock / p.parts;  // token rows per work item
    const int stage = R * 72;  // bytes of one work item's image
    unsigned char* wbuf = smem + warp * 2 * stage;
    uint2* bfr = reinterpret_cast<uint2*>(smem + kWarps * 2 * stage);
    auto copy_item = [&](unsigned char* dst, int item) {
        copy_index_part(p, dst, pt[item >> lg_parts], item & (p.parts - 1), R, lane);
    };
    // Launched early by PDL, a CTA reads the sequence length, the page table and its first index-key page (history
    // blocks: complete, never rewritten) before the grid-dependency wait (msa_decode.h, MsaDecodeOptions::pdl): the
    // trace of session 6 measured 1.5-2.5 us from the wait to the first page at batch 1. Everything the previous
    // kernel may write (index queries, scores, counters) is touched only after the wait.
    if (it_begin < it_end && it < it_end) copy_index_part(p, wbuf, first_page, it & (p.parts - 1), R, lane);
    if (!p.persistent) {
        pdl_wait();
        trace_event(p.trace, kTrIdxWaited);
        // Early trigger: the dependent attention grid may launch once every indexer CTA has passed this point, i.e.
        // once the last wave has started, instead of once the last wave has scored; with ready flags its CTAs start
        // on the requests already done while the last wave streams. Never before the wait: the attention of the
        // previous call must have reset the ready flags first.
        if (p.early_trigger) pdl_trigger();
    }
    if (it_begin < it_end) {
        cp_async_commit();
        if constexpr (Q8) {  // 5-8 queries (3-4 n-tiles) on wgmma
            if (p.parts == 1)
                run_wq8_items<kBlock>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
            else if (p.parts == 2)
                run_wq8_items<kBlock / 2>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
            else
                run_wq8_items<kBlock / 4>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
        } else if constexpr (FP8) {  // one query, <= 4 index heads: fragments straight from global memory (run_fp8_items)
            if (p.wgmma && p.parts == 1)
                run_wg_items<kBlock>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
            else if (p.wgmma && p.parts == 2)
                run_wg_items<kBlock / 2>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
            else if (p.wgmma)
                run_wg_items<kBlock / 4>(p, smem, wbuf, pt, s, it_begin, it_end, lane, warp);
            else
                run_fp8_items(p, smem, wbuf, stage, R, s, it, it_end, lane, warp, copy_item);
        } else {
            // Index-query fragments of this request (FP16 x 2^7), zero rows past `rows`: all loads first, then convert.
            const int passes = (p.nt_total + NT - 1) / NT;
            const int ntp = passes * NT;  // n-tiles incl. padding, <= 8
            uint2 u[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const int unit = tid + k * kWarps * 32, l = unit & 31, gp = (unit >> 5) & 3, nt = unit >> 7;
                const int row = nt * 8 + (l >> 2);
                u[k] = make_uint2(0u, 0u);
                if (k < ntp && row < p.rows)
                    u[k] = *reinterpret_cast<const uint2*>(p.iq + (static_cast<std::size_t>(s) * p.rows + row) * kHeadDim +
                                                           gp * 32 + (l & 3) * 8);
            }
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                if (k < ntp) {
                    const int unit = tid + k * kWarps * 32, l = unit & 31, gp = (unit >> 5) & 3, nt = unit >> 7;
                    std::uint32_t q4[4];
                    query_pairs(u[k], q4);
                    bfr[((nt * 4 + gp) * 2 + 0) * 32 + l] = make_uint2(q4[0], q4[1]);
                    bfr[((nt * 4 + gp) * 2 + 1) * 32 + l] = make_uint2(q4[2], q4[3]);
                }
            }
            __syncthreads();
            for (int i = 0; it < it_end; ++i, it += kWarps) {
                if (it + kWarps < it_end) copy_item(wbuf + ((i + 1) & 1) * stage, it + kWarps);
                cp_async_commit();
                cp_async_wait<1>();
                __syncwarp();
                const unsigned char* img = wbuf + (i & 1) * stage;
                for (int pass = 0; pass < passes; ++pass) {
                    float mx[NT][2];
                    index_rows<NT>(img, bfr + pass * NT * 256, lane, R / 16, p.mul, mx);
                    store_block_maxima<NT>(p, s, it, lane, pass * NT * 8, mx);
                }
                __syncwarp();
            }
        }
        cp_async_wait<0>();
    }
    if (!p.persistent && !p.early_trigger) pdl_trigger();
    // Top-k in the attention CTAs without ready flags: they wait for this whole grid, so there is nothing to publish
    // and no last CTA to find; the arrival atomic (a fence and two CTA barriers, 0.7 us at 1 x 32K in session 14's
    // trace) would only delay the grid's completion.
    if (p.attn_topk && !p.ready) {
        trace_barrier_event(p.trace, kTrIdxScored);
        return;
    }
    __threadfence();
    __syncthreads();
    trace_event(p.trace, kTrIdxScored);
    if (tid == 0) s_last = atomicAdd(&p.counters[s], 1u) == static_cast<unsigned>(p.chunks - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    trace_event(p.trace, kTrTopkStart);
    if (!p.attn_topk)
        for (int row = warp; row < p.rows; row += kWarps) topk_row(p, s, row, kv_len, lane);
    trace_barrier_event(p.trace, kTrTopkEnd);  // (trace builds only: a CTA barrier first)
    if (p.ready) {  // publish the request's rows: every writer fences, then one release store
        __threadfence();
        __syncthreads();
        if (tid == 0) st_release(p.ready + s, 1u);
    }
    if (tid == 0) p.counters[s] = 0;
}

// Grid: (chunks, batch) CTAs, one work unit each; or (persistent) about one wave of CTAs that take units
// (request-major, so requests finish and run their top-k early) from a global counter until none is left; the
// last CTA to finish leaves the counters at zero for the next call.
// Register caps: 3 CTAs per SM for the 4-n-tile build (167 registers); MSA_IDX_MIN_CTAS (default 4: 126 registers,
// no spill) for the 1- and 2-n-tile builds (5 gives 96 registers and a 52-byte spill in the 1-n-tile build).
#ifndef MSA_IDX_MIN_CTAS
#define MSA_IDX_MIN_CTAS 4
#endif
// The 8-query wgmma indexer (Q8, run_wq8_items) is capped at 128 registers: 4 CTAs per SM with half pages.
template <int NT, bool FP8 = false, bool Q8 = false>
__global__ void __launch_bounds__(kWarps * 32, Q8 ? 4 : NT == 4 ? 3 : MSA_IDX_MIN_CTAS) index_topk_kernel(const IdxParams p) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int s_last, s_unit;
    trace_event(p.trace, kTrIdxStart);
    if (!p.persistent) {  // index_unit waits for the previous kernel once its first page is on the way
        index_unit<NT, FP8, Q8>(p, smem, s_last, blockIdx.y, blockIdx.x);
        return;
    }
    // Persistent: wait for the previous kernel of the stream before anything (a no-op without PDL). With the early
    // trigger the attention grid launches at once (the whole grid is one resident wave), and its CTAs run beside the
    // indexer's where an SM has room (8 queries: two indexer CTAs and one attention CTA). Not faster in session 13's
    // run 5 (docs/cuda-notes.md section 20), so the persistent grid stays an option.
    pdl_wait();
    trace_event(p.trace, kTrIdxWaited);
    if (p.early_trigger) pdl_trigger();
    const int total = p.chunks * p.batch;
    for (;;) {
        __syncthreads();  // the previous unit is done with the shared memory
        if (threadIdx.x == 0) s_unit = static_cast<int>(atomicAdd(&p.work[0], 1u));
        __syncthreads();
        const int v = s_unit;
        if (v >= total) break;
        index_unit<NT, FP8, Q8>(p, smem, s_last, v / p.chunks, v % p.chunks);
    }
    if (!p.early_trigger) pdl_trigger();
    if (threadIdx.x == 0 && atomicAdd(&p.work[1], 1u) == gridDim.x - 1) {  // every CTA has taken its last unit
        p.work[0] = 0;
        p.work[1] = 0;
    }
}

// ---------------------------------------------------------------- sparse attention
struct AttnParams {
    const std::uint8_t* q; const std::uint8_t* k_cache; const std::uint8_t* v_cache;
    const int* seq_lens; int* topk_idx; const int* sel_pages; const int* page_table;
    float* out; float* part_o; float* part_lse; unsigned* counters;
    unsigned* ready; unsigned* consumed;  // per request (see IdxParams::ready); consumed counts the CTAs that saw it
    int q_len, nq, nkv, G, topk, max_blocks, splits, pages_per_split;
    bool warp_pipe;
    Mul mul;
    unsigned long long* trace;  // phase timeline (set_decode_trace), null when off
    // Non-null: the indexer's block maxima (IdxParams::scores layout); each CTA runs its (query, kv head) row's top-k
    // itself (split 0 writes it to topk_idx), in parallel over the rows instead of the indexer's last CTA per request
    // looping over them (8 rows per warp with 8 queries).
    float* scores;
    int parts;
    bool req_major;  // CTAs in request-major order (the linear block id runs over splits, then kv heads, then queries)
};
constexpr int kAttnStage = 2 * kPageHeadBytes;  // K page + V page
// Per-warp pipeline: a warp's 32-token K and V slices (rows + scales) per stage, kWarpStages stages per warp.
constexpr int kSlice = 32 * 72, kWarpStage = 2 * kSlice, kWarpStages = 3;
constexpr int kAttnSmemCta = 2 * kAttnStage, kAttnSmemWarp = kWarps * kWarpStages * kWarpStage;  // 36 KB, 54 KB
// The lean 4-warp attention (attn_kernel<*, true>: 4 CTAs per SM, at most 128 registers and 56 KB): two per-warp stages
// (or the CTA-wide pipeline's two pages, the same 36 KB), then the Q fragments in shared memory (4 KB) instead of 32
// registers per thread.
constexpr int kLeanQOff = kWarps * 2 * kWarpStage, kAttnSmemLean = kLeanQOff + 4096;
static_assert(kLeanQOff == kAttnSmemCta, "the lean Q fragments follow either pipeline's buffers");

// Scores of slice tokens past lim (not visible to the query) to -inf; lane column pair c.
template <int NTOK>
__device__ __forceinline__ void mask_past_lim(int tb, int lim, int c, float (&sa)[NTOK / 8][4]) {
    if (tb + NTOK - 1 > lim) {
#pragma unroll
        for (int nt = 0; nt < NTOK / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (tb + nt * 8 + 2 * c + (e & 1) > lim) sa[nt][e] = -CUDART_INF_F;
    }
}
// S = Q K^T of one warp's NTOK-token slice [tb, tb+NTOK) of a page image (K at kb: rows x 64 bytes, then the scales
// at sc_off): sa[n-tile][e] = (head r + 8 (e >> 1), token tb + 8 n-tile + 2c + (e & 1)), tokens past lim set to -inf.
// Q fragments qf[chunk][k-step][4].
template <int NTOK>
__device__ __forceinline__ void slice_scores(const unsigned char* kb, int tb, int lim, int lane, const Mul& mul,
                                             const std::uint32_t (&qf)[4][2][4], int sc_off, float (&sa)[NTOK / 8][4]) {
    const int r = lane >> 2, c = lane & 3;
    const unsigned char* krow = kb + (tb + r) * 64 + 4 * c;  // token tb + 8 nt + r, swizzle (r >> 1) & 3
    const unsigned char* kscl = kb + sc_off + (tb + r) * 8;
#pragma unroll
    for (int nt = 0; nt < NTOK / 8; ++nt) {
        sa[nt][0] = sa[nt][1] = sa[nt][2] = sa[nt][3] = 0.f;
        std::uint32_t ks[4];
        key_scales(kscl + nt * 64, c, ks);
#pragma unroll
        for (int gp = 0; gp < 4; ++gp) {
            std::uint32_t kk[4];
            fp4x8(lds32(krow + nt * 512 + (((gp ^ (r >> 1)) & 3) << 4)), mul, kk);
            mma16816(sa[nt], qf[gp][0], hmul2(kk[0], ks[gp]), hmul2(kk[1], ks[gp]));
            mma16816(sa[nt], qf[gp][1], hmul2(kk[2], ks[gp]), hmul2(kk[3], ks[gp]));
        }
    }
    mask_past_lim<NTOK>(tb, lim, c, sa);
}
// The same scores with the Q fragments in shared memory (lean attention): qs[(chunk * 2 + k-step) * 32 + lane] holds
// this lane's qf[chunk][k-step]. Chunk-outer so that only one chunk's fragments (8 registers) are live, the key scales
// of the slice's n-tiles taken first; each n-tile accumulates the same MMAs in the same order as above (same bits).
template <int NTOK>
__device__ __forceinline__ void slice_scores(const unsigned char* kb, int tb, int lim, int lane, const Mul& mul,
                                             const uint4* qs, int sc_off, float (&sa)[NTOK / 8][4]) {
    const int r = lane >> 2, c = lane & 3;
    const unsigned char* krow = kb + (tb + r) * 64 + 4 * c;
    const unsigned char* kscl = kb + sc_off + (tb + r) * 8;
    std::uint32_t ks[NTOK / 8][4];
#pragma unroll
    for (int nt = 0; nt < NTOK / 8; ++nt) {
        sa[nt][0] = sa[nt][1] = sa[nt][2] = sa[nt][3] = 0.f;
        key_scales(kscl + nt * 64, c, ks[nt]);
    }
#pragma unroll
    for (int gp = 0; gp < 4; ++gp) {
        const uint4 u0 = qs[(gp * 2) * 32 + lane], u1 = qs[(gp * 2 + 1) * 32 + lane];
        const std::uint32_t q0[4] = {u0.x, u0.y, u0.z, u0.w}, q1[4] = {u1.x, u1.y, u1.z, u1.w};
#pragma unroll
        for (int nt = 0; nt < NTOK / 8; ++nt) {
            std::uint32_t kk[4];
            fp4x8(lds32(krow + nt * 512 + (((gp ^ (r >> 1)) & 3) << 4)), mul, kk);
            mma16816(sa[nt], q0, hmul2(kk[0], ks[nt][gp]), hmul2(kk[1], ks[nt][gp]));
            mma16816(sa[nt], q1, hmul2(kk[2], ks[nt][gp]), hmul2(kk[3], ks[nt][gp]));
        }
    }
    mask_past_lim<NTOK>(tb, lim, c, sa);
}
// One warp's NTOK-token slice (NTOK 32 or 16) of a page image (K at kb, V at vb, each rows x 64 bytes then the
// scales at sc_off): S = Q K^T (16 heads x NTOK tokens), online softmax, O += P V; before_v() runs before the first V
// load. O accumulators o[dim n-tile][4] hold (head r, dim 32c+nd), (r, 32c+16+nd), (r+8, 32c+nd), (r+8, 32c+16+nd).
// The Q fragments come from the registers qf or (kLean) from shared memory at qs; the lean form also decodes V one
// 4-dim group at a time (8 B-fragment registers live instead of 32; the same MMAs in the same order).
template <int NTOK, bool kLean, class BeforeV>
__device__ __forceinline__ void attend_slice(const unsigned char* kb, const unsigned char* vb, int tb, int lim, int lane,
                                             const Mul& mul, const std::uint32_t (&qf)[4][2][4], const uint4* qs,
                                             float (&o)[16][4], float (&m)[2], float (&l)[2], int sc_off,
                                             BeforeV&& before_v) {
    const int r = lane >> 2, c = lane & 3;
    float sa[NTOK / 8][4];
    if constexpr (kLean)
        slice_scores<NTOK>(kb, tb, lim, lane, mul, qs, sc_off, sa);
    else
        slice_scores<NTOK>(kb, tb, lim, lane, mul, qf, sc_off, sa);
    float mx[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
    for (int nt = 0; nt < NTOK / 8; ++nt) {
        mx[0] = fmaxf(mx[0], fmaxf(sa[nt][0], sa[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(sa[nt][2], sa[nt][3]));
    }
    float alpha[2], neg[2];
    const float mold[2] = {m[0], m[1]};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 1));
        mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 2));
        const float mn = fmaxf(m[e], mx[e]);  // finite: the slice has a visible token
        alpha[e] = exp2f((m[e] - mn) * kLog2eOverSqrtD);
        m[e] = mn;
        neg[e] = -mn * kLog2eOverSqrtD;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < NTOK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sa[nt][e] = fast_exp2(fmaf(sa[nt][e], kLog2eOverSqrtD, neg[e >> 1]));
            sum[e >> 1] += sa[nt][e];
        }
    l[0] = l[0] * alpha[0] + sum[0];
    l[1] = l[1] * alpha[1] + sum[1];
    // Rescale O only when some row's running max moved after it held data (alpha < 1 on a non-empty O). With 8
    // queries that is 7 of 8 slices; a lazy max (moved only when exceeded by 2^8) skipped almost all rescales and was
    // no faster (session 18, run 2: docs/cuda-notes.md section 23).
    if (__any_sync(0xffffffffu, (alpha[0] != 1.f && mold[0] != -CUDART_INF_F) ||
                                    (alpha[1] != 1.f && mold[1] != -CUDART_INF_F))) {
#pragma unroll
        for (int nd = 0; nd < 16; ++nd) {
            o[nd][0] *= alpha[0];
            o[nd][1] *= alpha[0];
            o[nd][2] *= alpha[1];
            o[nd][3] *= alpha[1];
        }
    }
    before_v();
    // PV: B = V (tokens x dims); this thread's column r maps to dims 16r + nd; tokens 2c, 2c+1 | 2c+8, 2c+9 of each
    // 16-token k-step, loaded in a lane-dependent order so the 8-byte loads are bank-conflict free.
    const std::uint32_t selA = (c & 1) ? 0x1054u : 0x5410u, selB = (c & 1) ? 0x3276u : 0x7632u;
#pragma unroll
    for (int ks = 0; ks < NTOK / 16; ++ks) {
        const std::uint32_t a[4] = {pack_h2(sa[2 * ks][0], sa[2 * ks][1]), pack_h2(sa[2 * ks][2], sa[2 * ks][3]),
                                    pack_h2(sa[2 * ks + 1][0], sa[2 * ks + 1][1]),
                                    pack_h2(sa[2 * ks + 1][2], sa[2 * ks + 1][3])};
        // Half hh of the k-step (tokens tp, tp + 1 with tp = tb + 16 ks + 8 hh + 2c): the lane's V words z[4] (z[k]:
        // dims 4k + i of both tokens) and their scales sv.
        auto v_half = [&](int hh, std::uint32_t (&z)[4], std::uint32_t& sv) {
            const int tp = tb + ks * 16 + hh * 8 + 2 * c;
            // rows t1 = tp + (c & 1), t2 = tp + 1 - (c & 1): both have swizzle (t >> 1) & 3 == c
            const unsigned char* vrow = vb + tp * 64 + ((((r >> 1) ^ c) & 3) << 4) + 8 * (r & 1);
            const uint2 x1 = lds64(vrow + (c & 1) * 64), x2 = lds64(vrow + (1 - (c & 1)) * 64);
            const std::uint32_t sb = vb[sc_off + tp * 8 + r] | (vb[sc_off + (tp + 1) * 8 + r] << 8);
            sv = hmul2(e4m3x2_to_h2(sb), kH2x128);
            // Rows past the query position may hold stale bytes (even NaN scales): zero their V so 0 * V stays 0.
            if (tp > lim) sv &= 0xFFFF0000u;
            if (tp + 1 > lim) sv &= 0x0000FFFFu;
            z[0] = prmt(x1.x, x2.x, selA);
            z[1] = prmt(x1.x, x2.x, selB);
            z[2] = prmt(x1.y, x2.y, selA);
            z[3] = prmt(x1.y, x2.y, selB);
        };
        if constexpr (kLean) {
            std::uint32_t z0[4], z1[4], sv0, sv1;
            v_half(0, z0, sv0);
            v_half(1, z1, sv1);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                std::uint32_t v0[4], v1[4];
                fp4x8(z0[k], mul, v0);
                fp4x8(z1[k], mul, v1);
#pragma unroll
                for (int i = 0; i < 4; ++i) mma16816(o[4 * k + i], a, hmul2(v0[i], sv0), hmul2(v1[i], sv1));
            }
        } else {
            std::uint32_t vf[2][16];
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                std::uint32_t z[4], sv;
                v_half(hh, z, sv);
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    std::uint32_t vv[4];
                    fp4x8(z[k], mul, vv);  // dims 4k + i of tokens (tp, tp + 1)
#pragma unroll
                    for (int i = 0; i < 4; ++i) vf[hh][4 * k + i] = hmul2(vv[i], sv);
                }
            }
#pragma unroll
            for (int nd = 0; nd < 16; ++nd) mma16816(o[nd], a, vf[0][nd], vf[1][nd]);
        }
    }
}

// Q fragments from qb, the G heads' rows of 128 E4M3 bytes: rows r and r + 8 (zero past G), E4M3 -> FP16 x 2^7, in
// the A layout of slice_scores.
__device__ __forceinline__ void query_frags(const std::uint8_t* qb, int G, int lane, std::uint32_t (&qf)[4][2][4]) {
    const int r = lane >> 2, c = lane & 3;
#pragma unroll
    for (int gp = 0; gp < 4; ++gp)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int head = r + 8 * hh;
            const uint2 u = head < G ? *reinterpret_cast<const uint2*>(qb + head * kHeadDim + gp * 32 + c * 8)
                                     : make_uint2(0u, 0u);
            std::uint32_t q4[4];
            query_pairs(u, q4);
            qf[gp][0][hh] = q4[0];
            qf[gp][0][2 + hh] = q4[1];
            qf[gp][1][hh] = q4[2];
            qf[gp][1][2 + hh] = q4[3];
        }
}
// The E4M3 query rows of (query bq, kv head h).
__device__ __forceinline__ const std::uint8_t* unit_queries(const AttnParams& p, int bq, int h) {
    return p.q + (static_cast<std::size_t>(bq) * p.nq + static_cast<std::size_t>(h) * p.G) * kHeadDim;
}
// Both attention kernels' start: let the next kernel launch, the queries' fragments, then the wait for the top-k
// rows of the indexer launched just before (that whole grid, or with ready flags only this request's, later).
struct AttnUnit {
    int pos;           // the query's position
    std::size_t unit;  // (query, kv head) index
};
__device__ __forceinline__ AttnUnit attn_prologue(const AttnParams& p, int bq, int h, int s, int qi, int lane,
                                                  std::uint32_t (&qf)[4][2][4]) {
    trace_event(p.trace, kTrAttnStart);
    pdl_trigger();  // the next kernel of the stream (the next indexer) may be scheduled; it waits for our completion
    const int kv_len = p.seq_lens[s];  // an input, not written by the indexer: read before the wait
    query_frags(unit_queries(p, bq, h), p.G, lane, qf);
    if (!p.ready) pdl_wait();
    trace_event(p.trace, kTrAttnWaited);
    return {kv_len - p.q_len + qi, static_cast<std::size_t>(bq) * p.nkv + h};
}
// Warp 0 of an attention CTA: this split's selected pages of `unit` (request s, query position pos), compacted
// (ballot) into s_blk / s_pg (s_n of them) so that the page loop sees only valid ones. With ready flags it first waits
// for the request's scores or top-k; with AttnParams::scores it runs the row's top-k itself.
__device__ __forceinline__ void select_split_pages(const AttnParams& p, int s, int pos, std::size_t unit, int split,
                                                   int lane, int* s_blk, int* s_pg, int& s_n) {
    if (p.ready) {
        while (ld_acquire(p.ready + s) == 0u) {
        }
        // The last CTA of the request to get here resets the flag for the next call (the next indexer waits for
        // this grid to complete before it can set it again).
        if (lane == 0 && atomicAdd(p.consumed + s, 1u) == static_cast<unsigned>(p.q_len * p.nkv * p.splits - 1)) {
            p.consumed[s] = 0;
            p.ready[s] = 0;
        }
    }
    int blk = -1, pg = -1;
    const int slot = split * p.pages_per_split + lane;
    if (p.scores) {
        // The top-k's phases go to the indexer's top-k events (unused when the attention runs it), from one CTA.
        unsigned long long* tr = unit == 0 && split == 0 ? p.trace : nullptr;
        trace_event(tr, kTrTopkStart);
        const TopkPick pk = topk_pick(row_scores(p.scores, unit, p.max_blocks, p.parts), p.parts,
                                      p.page_table + static_cast<std::size_t>(s) * p.max_blocks, pos, p.topk, lane, tr);
        trace_event(tr, kTrTopkEnd);
        if (split == 0 && lane < p.topk) p.topk_idx[unit * p.topk + lane] = pk.blk;
        const int b = __shfl_sync(0xffffffffu, pk.blk, slot & 31), g = __shfl_sync(0xffffffffu, pk.page, slot & 31);
        if (lane < p.pages_per_split && slot < p.topk) {
            blk = b;
            pg = g;
        }
    } else if (lane < p.pages_per_split && slot < p.topk && pos >= 0) {
        blk = __ldcg(p.topk_idx + unit * p.topk + slot);
        if (p.sel_pages) pg = __ldcg(p.sel_pages + unit * p.topk + slot);  // no dependent page-table load
        else if (blk >= 0) pg = p.page_table[static_cast<std::size_t>(s) * p.max_blocks + blk];
    }
    const unsigned valid = __ballot_sync(0xffffffffu, blk >= 0);
    if (blk >= 0) {
        const int idx = __popc(valid & ((1u << lane) - 1u));
        s_blk[idx] = blk;
        s_pg[idx] = pg;
    }
    if (lane == 0) s_n = __popc(valid);
}

// Swizzled [16 heads][128 dims] FP32 slab: conflict-free for the fragment-order stores and the row-order reads.
__device__ __forceinline__ int slab_idx(int head, int dim) {
    return head * kHeadDim + (dim ^ ((((dim >> 5) & 3) << 3) ^ (head & 7)));
}

// CTA = (query, kv head, split) of 4 warps (8-warp CTAs at batch 1-4: attn8_kernel below): the split's selected pages
// stream through a two-stage cp.async buffer (or, with warp_pipe, per-warp buffers); each warp owns a 32-token slice
// of every page. Warps merge through shared memory; with several splits the partial results
// (normalised O and base-2 LSE) either go to the workspace and the last CTA of the (query, kv head) merges them, or
// (kCluster) stay in shared memory: the splits of one (query, kv head) are one thread-block cluster, and CTA rank k
// merges heads k, k + splits, ... reading the other CTAs' partials through distributed shared memory.
#ifndef MSA_ATTN_MIN_CTAS  // resident 4-warp attention CTAs per SM the register budget is sized for
#define MSA_ATTN_MIN_CTAS 3
#endif
// Normalised merge weight of one split partial from the base-2 LSEs of all splits, one per lane (-inf for an empty
// split and for lanes past the splits): max and sum over the warp by butterflies (every lane gets the bitwise same
// result: each step adds the same two values), so the chain is ~12 shuffles rather than 3 x 16 dependent steps of
// one thread (2.5-2.9 us at batch 1 in the trace of session 6). The cluster and the workspace merges both use it,
// so that their outputs are bit-identical (the decode test checks it). kFast: the fast exp2 and division (the 8-warp
// kernel's merge, which no other merge must match bitwise).
template <bool kFast = false>
__device__ __forceinline__ float split_weight(float x) {
    float mxl = x;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mxl = fmaxf(mxl, __shfl_xor_sync(0xffffffffu, mxl, o));
    const float d = x - mxl;
    const float e = (mxl == -CUDART_INF_F || x == -CUDART_INF_F) ? 0.f : kFast ? fast_exp2(d) : exp2f(d);
    float den = e;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    return (den > 0.f && x != -CUDART_INF_F) ? (kFast ? __fdividef(e, den) : e / den) : 0.f;
}

// kLean: 4 CTAs per SM (MsaDecodeOptions::attn_lean): at most 128 registers (the Q fragments in shared memory, V decoded
// one 4-dim group at a time) and 40 KB of shared memory (two per-warp stages instead of three). Same results bit for bit.
template <bool kCluster, bool kLean = false>
__global__ void __launch_bounds__(kWarps * 32, kLean ? 4 : MSA_ATTN_MIN_CTAS) attn_kernel(const AttnParams p) {
    extern __shared__ __align__(128) unsigned char sm[];  // kAttnSmemCta, kAttnSmemWarp or kAttnSmemLean bytes (>= the
                                                          // 32 KB slabs)
    __shared__ float s_m[kWarps][16], s_l[kWarps][16], s_f[16][16], s_L[16], s_scale[16], s_lse[16][16];
    __shared__ int s_blk[16], s_pg[16], s_n, s_last;
    // Request-major order (an option, no cluster; MsaDecodeOptions::attn_order): CTAs are dispatched in linear block
    // order, so those of the requests whose top-k is done first become resident first. Measured slower than grid
    // order in session 13 (the last request's CTAs are then dispatched last instead of being resident already).
    const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int bq = kCluster || !p.req_major ? static_cast<int>(blockIdx.x) : static_cast<int>(lin / (gridDim.y * gridDim.z));
    const int h = kCluster || !p.req_major ? static_cast<int>(blockIdx.y) : static_cast<int>(lin / gridDim.z % gridDim.y);
    const int split = kCluster || !p.req_major ? static_cast<int>(blockIdx.z) : static_cast<int>(lin % gridDim.z);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const int s = bq / p.q_len, qi = bq % p.q_len;
    std::uint32_t qf[4][2][4];
    const AttnUnit au = attn_prologue(p, bq, h, s, qi, lane, qf);
    const int pos = au.pos;
    const std::size_t unit = au.unit;
    uint4* qsm = reinterpret_cast<uint4*>(sm + kLeanQOff);  // lean: the Q fragments, published by the barrier below
    if constexpr (kLean) {
        if (warp == 0)
#pragma unroll
            for (int gp = 0; gp < 4; ++gp)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    qsm[(gp * 2 + j) * 32 + lane] = make_uint4(qf[gp][j][0], qf[gp][j][1], qf[gp][j][2], qf[gp][j][3]);
    }
    if (warp == 0) select_split_pages(p, s, pos, unit, split, lane, s_blk, s_pg, s_n);
    __syncthreads();
    trace_event(p.trace, kTrAttnPages);
    const int n = s_n;
    auto copy_pages = [&](unsigned char* dst, int page) {
        const std::size_t rec = (static_cast<std::size_t>(page) * p.nkv + h) * kPageHeadBytes;
        copy_rows_async(dst, p.k_cache + rec, 0, kBlock, tid, kWarps * 32);
        copy_rows_async(dst + kPageHeadBytes, p.v_cache + rec, 0, kBlock, tid, kWarps * 32);
    };
    float o[16][4];
#pragma unroll
    for (int nd = 0; nd < 16; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
    constexpr int kTok = kBlock / kWarps;  // tokens of a page per warp (CTA-wide pipeline)
    if (p.warp_pipe) {
        // Each warp streams only its own 32-token slices (K and V rows + scales, 4.6 KB per page) through a private
        // three-stage buffer (lean: two), K and V as separate cp.async groups: no CTA barrier per page, the V load
        // overlaps S, and two pages (lean: one) are in flight while one is computed.
        constexpr int kStages = kLean ? 2 : kWarpStages;
        unsigned char* wst = sm + warp * kStages * kWarpStage;
        auto copy_slice = [&](unsigned char* dst, int page) {
            const std::size_t rec = (static_cast<std::size_t>(page) * p.nkv + h) * kPageHeadBytes;
            copy_rows_async(dst, p.k_cache + rec, warp * 32, 32, lane, 32);
            cp_async_commit();
            copy_rows_async(dst + kSlice, p.v_cache + rec, warp * 32, 32, lane, 32);
            cp_async_commit();
        };
        for (int j = 0; j < kStages - 1; ++j) {
            if (j < n) {
                copy_slice(wst + j * kWarpStage, s_pg[j]);
            } else {
                cp_async_commit();
                cp_async_commit();
            }
        }
        for (int i = 0; i < n; ++i) {
            const int nxt = i + kStages - 1;
            if (nxt < n) {
                copy_slice(wst + (nxt % kStages) * kWarpStage, s_pg[nxt]);
            } else {
                cp_async_commit();
                cp_async_commit();
            }
            cp_async_wait<2 * kStages - 1>();  // this page's K slice (pending: its V, then K and V of the next pages)
            __syncwarp();
            const unsigned char* kb = wst + (i % kStages) * kWarpStage;
            const int lim = pos - s_blk[i] * kBlock - warp * 32;  // slice tokens t <= lim are visible
            if (lim >= 0)
                attend_slice<32, kLean>(kb, kb + kSlice, 0, lim, lane, p.mul, qf, qsm, o, m, l, 32 * 64, [] {
                    cp_async_wait<2 * kStages - 2>();
                    __syncwarp();
                });
            __syncwarp();  // the stage is refilled by the next iteration's copy
        }
        cp_async_wait<0>();
        __syncthreads();  // the merge slabs below overlap other warps' stages
    } else {
        if (n > 0) copy_pages(sm, s_pg[0]);
        cp_async_commit();
        for (int i = 0; i < n; ++i) {
            if (i + 1 < n) copy_pages(sm + ((i + 1) & 1) * kAttnStage, s_pg[i + 1]);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const unsigned char* kb = sm + (i & 1) * kAttnStage;
            const int lim = pos - s_blk[i] * kBlock;  // tokens t <= lim of the page are visible
            if (warp * kTok <= lim)
                attend_slice<kTok, kLean>(kb, kb + kPageHeadBytes, warp * kTok, lim, lane, p.mul, qf, qsm, o, m, l,
                                          kBlock * 64,
                                   [] {});
            __syncthreads();
        }
        cp_async_wait<0>();
    }
    trace_barrier_event(p.trace, kTrAttnComputed);
    // ---- merge the four warps
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        l[e] += __shfl_xor_sync(0xffffffffu, l[e], 1);
        l[e] += __shfl_xor_sync(0xffffffffu, l[e], 2);
    }
    if (c == 0) {
        s_m[warp][r] = m[0]; s_m[warp][r + 8] = m[1];
        s_l[warp][r] = l[0]; s_l[warp][r + 8] = l[1];
    }
    float* slab = reinterpret_cast<float*>(sm) + warp * 16 * kHeadDim;
#pragma unroll
    for (int nd = 0; nd < 16; ++nd) {
        slab[slab_idx(r, 32 * c + nd)] = o[nd][0];
        slab[slab_idx(r, 32 * c + 16 + nd)] = o[nd][1];
        slab[slab_idx(r + 8, 32 * c + nd)] = o[nd][2];
        slab[slab_idx(r + 8, 32 * c + 16 + nd)] = o[nd][3];
    }
    __syncthreads();
    trace_event(p.trace, kTrAttnSlabs);
    if (tid < 16) {
        float M = -CUDART_INF_F;
        for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_m[w][tid]);
        float L = 0.f;
        for (int w = 0; w < kWarps; ++w) {
            const float f = s_m[w][tid] == -CUDART_INF_F ? 0.f : exp2f((s_m[w][tid] - M) * kLog2eOverSqrtD);
            s_f[w][tid] = f;
            L += f * s_l[w][tid];
        }
        s_L[tid] = L;
        s_scale[tid] = 128.0f / L;  // 128 undoes V's 2^-7; used only where L > 0 (one division per head, here)
        s_lse[0][tid] = L > 0.f ? M * kLog2eOverSqrtD + log2f(L) : -CUDART_INF_F;
    }
    __syncthreads();
    float* slabs = reinterpret_cast<float*>(sm);
    const int dim = tid;  // 128 threads: one dim each
    for (int h0 = 0; h0 < p.G; h0 += 8) {  // 8 heads x kWarps slabs: all shared loads first
        float x[8][kWarps];
#pragma unroll
        for (int hh = 0; hh < 8; ++hh)
#pragma unroll
            for (int w = 0; w < kWarps; ++w)
                x[hh][w] = h0 + hh < p.G ? slabs[w * 16 * kHeadDim + slab_idx(h0 + hh, dim)] : 0.f;
#pragma unroll
        for (int hh = 0; hh < 8; ++hh) {
            const int head = h0 + hh;
            if (head >= p.G) break;
            float acc = 0.f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) acc = fmaf(s_f[w][head], x[hh][w], acc);
            const float val = s_L[head] > 0.f ? acc * s_scale[head] : 0.f;
            if (p.splits == 1)
                p.out[(static_cast<std::size_t>(bq) * p.nq + h * p.G + head) * kHeadDim + dim] = val;
            else if (kCluster)
                slabs[slab_idx(head, dim)] = val;  // in place in warp 0's slab: only this thread touches the element
            else
                p.part_o[((unit * p.splits + split) * 16 + head) * kHeadDim + dim] = val;
        }
    }
    // With ready flags the CTA never waited for the indexer grid: it waits before it exits, so that this grid
    // completes after the indexer's (its last CTAs still reset counters; the next kernel waits only for this grid).
    if (p.splits == 1) {  // uniform over the grid (and then the launch has no cluster)
        trace_barrier_event(p.trace, kTrAttnEnd);
        if (p.ready) pdl_wait();
        return;
    }
    if constexpr (kCluster) {
        // Partials: slab 0 (O) and s_lse[0] (base-2 LSE) of every CTA of the cluster; rank == split.
        cg::cluster_group cluster = cg::this_cluster();
        trace_event(p.trace, kTrAttnMerged);
        cluster.sync();  // release/acquire: every CTA's partial is visible cluster-wide
        trace_event(p.trace, kTrAttnSynced);
        // The heads this CTA merges are split + i * splits (i = 0, 1, ...): warp i loads head i's
        // LSEs of every split (lane = split) and writes their weights to s_f[i][split]; then each thread (one dim)
        // sums the splits' outputs.
        const int n_own = (p.G - split + p.splits - 1) / p.splits;  // <= 8: the cluster merge needs splits > 1
        for (int i = warp; i < n_own; i += kWarps) {
            const float x = lane < p.splits ? *cluster.map_shared_rank(&s_lse[0][split + i * p.splits], lane)
                                            : -CUDART_INF_F;
            const float w = split_weight(x);
            if (lane < p.splits) s_f[i][lane] = w;
        }
        __syncthreads();
        trace_event(p.trace, kTrAttnWeighted);
        for (int i = 0; i < n_own; ++i) {
            const int head = split + i * p.splits;
            float v[16];
#pragma unroll
            for (int j = 0; j < 16; ++j)  // all remote loads issued together
                if (j < p.splits) v[j] = *cluster.map_shared_rank(slabs + slab_idx(head, dim), j);
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < 16; ++j)
                if (j < p.splits) acc = fmaf(s_f[i][j], v[j], acc);
            p.out[(static_cast<std::size_t>(bq) * p.nq + h * p.G + head) * kHeadDim + dim] = acc;
        }
        trace_event(p.trace, kTrAttnStored);
        cluster.sync();  // no CTA leaves while another still reads its shared memory
        trace_event(p.trace, kTrAttnEnd);
        if (p.ready) pdl_wait();
        return;
    }
    trace_event(p.trace, kTrAttnMerged);
    if (tid < 16) p.part_lse[(unit * p.splits + split) * 16 + tid] = s_lse[0][tid];
    __threadfence();
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&p.counters[unit], 1u) == static_cast<unsigned>(p.splits - 1);
    __syncthreads();
    trace_event(p.trace, kTrAttnSynced);  // here: past the arrival atomic
    if (!s_last) {
        trace_event(p.trace, kTrAttnEnd);
        if (p.ready) pdl_wait();
        return;
    }
    __threadfence();
    for (int i = tid; i < p.splits * 16; i += kWarps * 32) s_lse[i >> 4][i & 15] = __ldcg(p.part_lse + unit * p.splits * 16 + i);
    __syncthreads();
    for (int head = warp; head < 16; head += kWarps) {  // per-head merge weights: warp = head, lane = split
        const float w = split_weight(lane < p.splits ? s_lse[lane][head] : -CUDART_INF_F);
        if (lane < p.splits) s_f[lane][head] = w;
    }
    __syncthreads();
    const float* wts = &s_f[0][0];
    const float* pob = p.part_o + unit * p.splits * 16 * kHeadDim + dim;
    // Up to 64 partial loads in flight per thread: all 16 heads at once for <= 4 splits (one L2 round trip instead of
    // four: the merge is on the critical path of the step's last requests), 8 heads for <= 8 splits, else 4. Each
    // head's sum runs over the splits in order, as the cluster merge's.
    auto merge_heads = [&](auto heads_c, auto splits_c) {
        constexpr int HPR = decltype(heads_c)::value, SPL = decltype(splits_c)::value;
        for (int h0 = 0; h0 < p.G; h0 += HPR) {
            float v[HPR][SPL];
#pragma unroll
            for (int hh = 0; hh < HPR; ++hh)
#pragma unroll
                for (int j = 0; j < SPL; ++j)
                    v[hh][j] = (j < p.splits && h0 + hh < p.G) ? __ldcg(pob + (j * 16 + h0 + hh) * kHeadDim) : 0.f;
#pragma unroll
            for (int hh = 0; hh < HPR; ++hh) {
                if (h0 + hh >= p.G) break;
                float acc = 0.f;
#pragma unroll
                for (int j = 0; j < SPL; ++j)
                    if (j < p.splits) acc = fmaf(wts[j * 16 + h0 + hh], v[hh][j], acc);
                p.out[(static_cast<std::size_t>(bq) * p.nq + h * p.G + h0 + hh) * kHeadDim + dim] = acc;
            }
        }
    };
    if (p.splits <= 4) merge_heads(std::integral_constant<int, 16>{}, std::integral_constant<int, 4>{});
    else if (p.splits <= 8) merge_heads(std::integral_constant<int, 8>{}, std::integral_constant<int, 8>{});
    else merge_heads(std::integral_constant<int, 4>{}, std::integral_constant<int, 16>{});
    if (tid == 0) p.counters[unit] = 0;
    trace_barrier_event(p.trace, kTrAttnEnd);
    if (p.ready) pdl_wait();
}

// ---- 8-warp attention CTAs (one-query steps of at most 16 units, 64 CTAs: the latency of small batches)
// The warps split S by tokens (warp w: tokens 16w..16w+15 of each page, as attend_slice) but P V by output dims (warp
// w: n-tiles 2w and 2w + 1 of o, i.e. dims 32c + 2w + {0, 1} and 32c + 16 + 2w + {0, 1} of lane (r, c)). They share each
// page's row maxima (one exchange per page) and P (an FP16 [16 heads][128 tokens] tile), so every warp's o already
// covers all the CTA's tokens and the row sums come from one more MMA per k-step (P times ones): there is no merge of
// warp partials (the 4-warp kernel's 64 KB slab round trip, 2.2 us of the 1 x 32K step in session 14's trace). With a
// cluster, each CTA then pushes its normalised partial of head hd (128 floats) and its LSE into the shared memory of
// CTA rank hd % splits by st.async, counted on that CTA's mbarrier, and each CTA merges its own heads from local
// shared memory once they are all there: no cluster barrier after the compute, no remote loads.
constexpr int kPRow = 2 * kBlock + 16;                      // bytes per head row of the P tile (padding: no conflicts)
constexpr int kPTile = 16 * kPRow;
constexpr int kRecvRows = 31;                               // ceil(G / splits) * splits <= G + splits - 1 <= 31
constexpr int kAttnSmem8 = 2 * kAttnStage + kPTile + kRecvRows * kHeadDim * 4;
__device__ __forceinline__ void cluster_arrive_release() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// The shared::cluster address of the same offset in CTA `rank` of the cluster.
__device__ __forceinline__ unsigned cluster_addr(unsigned local, unsigned rank) {
    unsigned a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(local), "r"(rank));
    return a;
}
// Remote stores into another CTA's shared memory that count their bytes on its barrier rbar (both shared::cluster).
__device__ __forceinline__ void st_async_v2(unsigned addr, float a, float b, unsigned rbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(addr),
                 "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(rbar)
                 : "memory");
}
__device__ __forceinline__ void st_async_f32(unsigned addr, float a, unsigned rbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(addr),
                 "r"(__float_as_uint(a)), "r"(rbar)
                 : "memory");
}

// O += P V for this warp's two dim n-tiles over one page: A = P (heads x tokens) from the tile, B = V (tokens x dims
// 16r + 2w + j) decoded from byte w of each token's 8-byte group r. Tokens past lim get a zero V scale (their P is 0;
// stale rows may hold NaN scales). o[2] += P times ones: the row sums of P (every column), so each warp has the
// softmax denominators of all the CTA's tokens without an exchange (of the FP16 P the numerators use).
constexpr std::uint32_t kH2One = 0x3C003C00u;  // f16x2 (1, 1)
__device__ __forceinline__ void pv_dim_pair(const unsigned char* vb, const unsigned char* ptile, int lim, int warp,
                                            int lane, const Mul& mul, float (&o)[3][4]) {
    const int r = lane >> 2, c = lane & 3;
    // Token rows 2c + (c & 1) and 2c + 1 - (c & 1) of each k-step (this order halves the bank conflicts), their
    // swizzled 16-byte chunk (r >> 1) and the 4-byte word holding byte w.
    const unsigned char* vw = vb + (2 * c + (c & 1)) * 64 + ((((r >> 1) ^ c) & 3) << 4) + 8 * (r & 1) + (warp & 4);
    const int d1 = (c & 1) ? -64 : 64;  // the other token of the pair
    const int k = warp & 3;             // byte of the word
    // Selector putting byte k of the pair's first and second token at bytes 0 and 2 (the loads come in lane order).
    const std::uint32_t sel = (c & 1) ? (static_cast<std::uint32_t>(4 + k) | (static_cast<std::uint32_t>(k) << 8))
                                      : (static_cast<std::uint32_t>(k) | (static_cast<std::uint32_t>(4 + k) << 8));
    const unsigned char* prow = ptile + ((lane & 7) + 8 * ((lane >> 3) & 1)) * kPRow + 16 * (lane >> 4);
    const unsigned char* vsc = vb + kBlock * 64 + 2 * c * 8 + r;  // scale of token 2c, group r
#pragma unroll
    for (int ks = 0; ks < kBlock / 16; ++ks) {
        std::uint32_t a[4];
        ldsm_x4(a, prow + ks * 32);
        const unsigned char* w0 = vw + ks * 16 * 64;
        const std::uint32_t y0 = lds32(w0), y1 = lds32(w0 + d1), y8 = lds32(w0 + 512), y9 = lds32(w0 + 512 + d1);
        // Bytes (tp, tp + 8, tp + 1, tp + 9) -> fp4x8 gives (tp, tp + 1) and (tp + 8, tp + 9) pairs of both nibbles.
        const std::uint32_t x = prmt(prmt(y0, y1, sel), prmt(y8, y9, sel), 0x6240u);
        std::uint32_t f[4];
        fp4x8(x, mul, f);
        const int tp = ks * 16 + 2 * c;
        const unsigned char* sc = vsc + ks * 128;
        std::uint32_t s01 = hmul2(e4m3x2_to_h2(sc[0] | (sc[8] << 8)), kH2x128);
        std::uint32_t s89 = hmul2(e4m3x2_to_h2(sc[64] | (sc[72] << 8)), kH2x128);
        if (tp > lim) s01 &= 0xFFFF0000u;
        if (tp + 1 > lim) s01 &= 0x0000FFFFu;
        if (tp + 8 > lim) s89 &= 0xFFFF0000u;
        if (tp + 9 > lim) s89 &= 0x0000FFFFu;
        mma16816(o[0], a, hmul2(f[0], s01), hmul2(f[2], s89));
        mma16816(o[1], a, hmul2(f[1], s01), hmul2(f[3], s89));
        mma16816(o[2], a, kH2One, kH2One);  // row sums of P
    }
}

template <bool kCluster>
__global__ void __launch_bounds__(256, 1) attn8_kernel(const AttnParams p) {
    extern __shared__ __align__(128) unsigned char sm[];  // two K+V page stages, the P tile, the received partials
    __shared__ __align__(16) float s_pmax[16][8];             // [head][warp]: page row maxima
    __shared__ float s_rlse[8][16];                            // [own head][split]: received LSEs
    __shared__ int s_blk[16], s_pg[16], s_n;
    __shared__ __align__(8) unsigned long long s_bar;  // cluster merge: the partials pushed to this CTA
    unsigned char* ptile = sm + 2 * kAttnStage;
    float* recv = reinterpret_cast<float*>(ptile + kPTile);  // [own head * splits + split][dim]
    const int bq = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const int s = bq / p.q_len, qi = bq % p.q_len;
    // Cluster merge: this CTA's heads are split + i * splits (n_own of them); its barrier expects every split's
    // partial (128 floats) and LSE of each, delivered by st.async. The early arrive (release) publishes the barrier's
    // initialisation; each CTA waits for that phase before its first remote store.
    const int n_own = kCluster ? (p.G - split + p.splits - 1) / p.splits : 0;  // <= 8 (splits > 1)
    if constexpr (kCluster) {
        if (tid == 0) {
            mbar_init_cta(&s_bar, 1);
            mbar_arrive_expect_tx(&s_bar, static_cast<unsigned>(n_own * p.splits * (kHeadDim + 1) * 4));
            fence_mbar_init_cluster();
        }
        __syncthreads();
        cluster_arrive_release();
    }
    std::uint32_t qf[4][2][4];
    const AttnUnit au = attn_prologue(p, bq, h, s, qi, lane, qf);
    const int pos = au.pos;
    const std::size_t unit = au.unit;
    // K and V of a page as two cp.async groups (a thread that copies nothing commits empty ones): S waits for K only.
    auto copy_pages = [&](unsigned char* dst, int page, int i, int n_thr) {
        const std::size_t rec = (static_cast<std::size_t>(page) * p.nkv + h) * kPageHeadBytes;
        copy_rows_async(dst, p.k_cache + rec, 0, kBlock, i, n_thr);
        cp_async_commit();
        copy_rows_async(dst + kPageHeadBytes, p.v_cache + rec, 0, kBlock, i, n_thr);
        cp_async_commit();
    };
    bool copying = false;  // (other warps must not read s_n before the CTA barrier: racecheck, run 10)
    if (warp == 0) {  // the split's pages; warp 0 starts the first one's copy before the CTA barrier
        select_split_pages(p, s, pos, unit, split, lane, s_blk, s_pg, s_n);
        __syncwarp();
        copying = s_n > 0;
        if (copying) copy_pages(sm, s_pg[0], lane, 32);
    }
    if (!copying) {
        cp_async_commit();
        cp_async_commit();
    }
    __syncthreads();
    trace_event(p.trace, kTrAttnPages);
    const int n = s_n;
    float o[3][4] = {};  // n-tiles 2w, 2w + 1 and the row sums (pv_dim_pair)
    float m[2] = {-CUDART_INF_F, -CUDART_INF_F};  // the same in every warp
    for (int i = 0; i < n; ++i) {
        if (i + 1 < n) {
            copy_pages(sm + ((i + 1) & 1) * kAttnStage, s_pg[i + 1], tid, 256);
        } else {
            cp_async_commit();
            cp_async_commit();
        }
        cp_async_wait<3>();  // this page's K (pending: its V, the next page's K and V)
        __syncthreads();
        const unsigned char* kb = sm + (i & 1) * kAttnStage;
        const int lim = pos - s_blk[i] * kBlock;  // tokens t <= lim of the page are visible (token 0 always)
        float sa[2][4];
        slice_scores<16>(kb, 16 * warp, lim, lane, p.mul, qf, kBlock * 64, sa);
        float mx[2] = {fmaxf(fmaxf(sa[0][0], sa[0][1]), fmaxf(sa[1][0], sa[1][1])),
                       fmaxf(fmaxf(sa[0][2], sa[0][3]), fmaxf(sa[1][2], sa[1][3]))};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 1));
            mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 2));
        }
        if (c == 0) {
            s_pmax[r][warp] = mx[0];
            s_pmax[r + 8][warp] = mx[1];
        }
        __syncthreads();
        float alpha[2], neg[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float4 a = *reinterpret_cast<const float4*>(&s_pmax[r + 8 * e][0]);
            const float4 b = *reinterpret_cast<const float4*>(&s_pmax[r + 8 * e][4]);
            const float pm = fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w)));
            const float mn = fmaxf(m[e], pm);  // finite: the page's token 0 is visible
            alpha[e] = m[e] == -CUDART_INF_F ? 0.f : exp2f((m[e] - mn) * kLog2eOverSqrtD);
            m[e] = mn;
            neg[e] = -mn * kLog2eOverSqrtD;
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) sa[nt][e] = fast_exp2(fmaf(sa[nt][e], kLog2eOverSqrtD, neg[e >> 1]));
            const int tok = 16 * warp + 8 * nt + 2 * c;
            *reinterpret_cast<std::uint32_t*>(ptile + r * kPRow + tok * 2) = pack_h2(sa[nt][0], sa[nt][1]);
            *reinterpret_cast<std::uint32_t*>(ptile + (r + 8) * kPRow + tok * 2) = pack_h2(sa[nt][2], sa[nt][3]);
        }
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            o[j][0] *= alpha[0];
            o[j][1] *= alpha[0];
            o[j][2] *= alpha[1];
            o[j][3] *= alpha[1];
        }
        cp_async_wait<2>();  // this page's V
        __syncthreads();     // the P tile and V are complete
        pv_dim_pair(kb + kPageHeadBytes, ptile, lim, warp, lane, p.mul, o);
        __syncthreads();  // the stage and the P tile are refilled next
    }
    cp_async_wait<0>();
    trace_event(p.trace, kTrAttnComputed);
    float scale[2], lse[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const float L = o[2][2 * e];  // row sum of head r + 8e
        scale[e] = L > 0.f ? __fdividef(128.0f, L) : 0.f;  // 128 undoes V's 2^-7 (L <= 128 tokens per page)
        lse[e] = L > 0.f ? m[e] * kLog2eOverSqrtD + __log2f(L) : -CUDART_INF_F;
    }
    trace_event(p.trace, kTrAttnSlabs);
    // This lane's values: head r + 8e, dims 32c + 2w + {0, 1} (q = 0) and 32c + 16 + 2w + {0, 1} (q = 1).
    auto value = [&](int e, int q) {
        return make_float2(o[0][2 * e + q] * scale[e], o[1][2 * e + q] * scale[e]);
    };
    if (p.splits == 1) {  // uniform over the grid (and then the launch has no cluster)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int head = r + 8 * e;
            if (head >= p.G) continue;
            float* dst = p.out + (static_cast<std::size_t>(bq) * p.nq + h * p.G + head) * kHeadDim + 32 * c + 2 * warp;
            *reinterpret_cast<float2*>(dst) = value(e, 0);
            *reinterpret_cast<float2*>(dst + 16) = value(e, 1);
        }
        trace_barrier_event(p.trace, kTrAttnEnd);
        if (p.ready) pdl_wait();
        return;
    }
    if constexpr (kCluster) {
        cluster_wait();  // every CTA of the cluster has started and initialised its barrier
        const unsigned bar = smem_addr(&s_bar);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int head = r + 8 * e;
            if (head >= p.G) continue;
            const unsigned owner = static_cast<unsigned>(head % p.splits);
            const int row = (head / p.splits) * p.splits + split;
            const unsigned dst = cluster_addr(smem_addr(recv + row * kHeadDim + 32 * c + 2 * warp), owner);
            const unsigned rbar = cluster_addr(bar, owner);
            const float2 v0 = value(e, 0), v1 = value(e, 1);
            st_async_v2(dst, v0.x, v0.y, rbar);
            st_async_v2(dst + 64, v1.x, v1.y, rbar);
            if (warp == 0 && c == 0)
                st_async_f32(cluster_addr(smem_addr(&s_rlse[head / p.splits][split]), owner), lse[e], rbar);
        }
        trace_event(p.trace, kTrAttnMerged);
        mbar_wait(&s_bar, 0);  // every partial of this CTA's heads has arrived (no cluster barrier)
        trace_event(p.trace, kTrAttnSynced);
        // This CTA's heads are split + i * splits; each thread (one dim of head i) sums the splits' partials in split
        // order (as the 4-warp cluster merge), with merge weights that every warp computes itself from the LSEs
        // (lane = split; no CTA barrier between the weights and the sums).
        const int dim = tid & (kHeadDim - 1);
        for (int i = tid >> 7; i < n_own; i += 2) {
            const float* src = recv + i * p.splits * kHeadDim + dim;
            float v[16];
#pragma unroll
            for (int j = 0; j < 16; ++j)
                if (j < p.splits) v[j] = src[j * kHeadDim];
            const float w = split_weight<true>(lane < p.splits ? s_rlse[i][lane] : -CUDART_INF_F);
            float wj[16];  // all broadcasts first, then the sum's chain
#pragma unroll
            for (int j = 0; j < 16; ++j) wj[j] = __shfl_sync(0xffffffffu, w, j);
            trace_event(p.trace, kTrAttnWeighted);
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < 16; ++j)
                if (j < p.splits) acc = fmaf(wj[j], v[j], acc);
            p.out[(static_cast<std::size_t>(bq) * p.nq + h * p.G + split + i * p.splits) * kHeadDim + dim] = acc;
        }
        trace_event(p.trace, kTrAttnStored);
        trace_barrier_event(p.trace, kTrAttnEnd);
        if (p.ready) pdl_wait();
    }
}

using AttnKernel = void (*)(AttnParams);
AttnKernel attn_kernel_for(bool cluster, int warps, bool lean) {
    if (warps == 8) return cluster ? attn8_kernel<true> : attn8_kernel<false>;
    if (lean && !cluster) return attn_kernel<false, true>;
    return cluster ? attn_kernel<true> : attn_kernel<false>;
}
std::size_t attn_smem(const MsaDecodePlan& p) {
    return p.attn_warps == 8 ? kAttnSmem8 : p.attn_lean ? kAttnSmemLean : p.attn_warp_pipe ? kAttnSmemWarp : kAttnSmemCta;
}

constexpr std::size_t kIdxSmemMax = kWarps * 2 * kPageHeadBytes + 8 * 256 * sizeof(uint2);  // parts = 1, q16
constexpr std::size_t kIdxSmemFp8Max =
    1024 + kWarps * 2 * kPageHeadBytes + kWarps * kBlock * kFp8TabStride * sizeof(float);

int sm_count() {
    int dev = 0, n = 0;
    detail::check(cudaGetDevice(&dev));
    detail::check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}

}  // namespace

namespace {
unsigned long long* g_trace = nullptr;  // set_decode_trace
}  // namespace

MsaDecodePlan make_decode_plan(const MsaGeometry& geo, int batch, int q_len, int max_blocks, const MsaDecodeOptions& opt) {
    const int G = geo.num_kv_heads > 0 ? geo.num_q_heads / geo.num_kv_heads : 0;
    if (batch < 1 || q_len < 1 || geo.num_kv_heads < 1 || q_len * geo.num_kv_heads > 64 || max_blocks < 1 ||
        max_blocks > 8192 || geo.topk < 1 || geo.topk > 16 || geo.num_q_heads % geo.num_kv_heads != 0 ||
        (G != 1 && G != 2 && G != 4 && G != 8 && G != 16))
        throw std::invalid_argument("msa::cuda::make_decode_plan: unsupported shape");
    MsaDecodePlan p;
    p.geo = geo;
    p.opt = opt;
    p.batch = batch;
    p.q_len = q_len;
    p.max_blocks = max_blocks;
    p.rows = q_len * geo.num_kv_heads;
    p.idx_ntiles = (p.rows + 7) / 8;
    p.idx_nt_pass = p.idx_ntiles <= 1 ? 1 : p.idx_ntiles <= 2 ? 2 : 4;
    if (opt.idx_nt_pass == 1 || opt.idx_nt_pass == 2 || opt.idx_nt_pass == 4)
        p.idx_nt_pass = std::min(p.idx_nt_pass, opt.idx_nt_pass);
    const int sms = sm_count();
    // Indexer work items: whole pages, or halves/quarters of pages when there are few (latency: more warps).
    const long long pages = static_cast<long long>(batch) * max_blocks;
    // 5-8-query steps (3-4 n-tiles in one pass) on wgmma unless switched off (idx_q8_wgmma = 1), also in the persistent
    // grid; half pages by default (4 CTAs per SM). Session 18, run 1 (us, mma.sync -> wgmma): 32 x 128K 287.0 -> 260.5, 8 x
    // 200K 129.7 -> 110.7, 32 x 32K 176.3 -> 167.9, 128 x 50K 717.2 -> 672.8, 8 x 32K 66.0 -> 64.6, 1 x 32K 22.5 -> 22.2.
    p.idx_wq8 = opt.idx_q8_wgmma != 1 && opt.indexer == MsaImpl::kMma && p.idx_nt_pass == 4 && p.idx_ntiles >= 3 &&
                p.idx_ntiles <= 4;
    // Half pages by default: 4.6 KB stages keep more warps resident per SM than whole pages. The mma.sync indexer
    // takes whole pages when more than 16 index rows (8 queries x 4 heads) share each decoded page: run 4 measured 3%
    // less at 32 x 128K and 32 x 32K with 8 queries than with half pages.
    p.idx_parts = opt.idx_parts == 1 || opt.idx_parts == 2 || opt.idx_parts == 4 ? opt.idx_parts
                  : pages <= 100LL * sms / 33                                   ? 4  // <= 400 pages on 132 SMs
                  : p.rows > 16 && !p.idx_wq8                                   ? 1
                                                                                : 2;
    // Items per warp: with one query per request about twice as many as up to session 12 (session 13 sweep: 32 x 32K
    // 63.8 -> 59.4 us with 4 instead of 2; 32 x 128K and 64 x 64K already at the cap of 8). Several queries keep the
    // old divisor (32 x 128K with 8 queries was slower with more: 285.7 -> 292.5 us at 12 or 16).
    const long long pages_per_ipw = (p.rows <= 4 ? 16LL : 32LL) * sms;
    const int ipw = opt.idx_pages_per_warp > 0 ? opt.idx_pages_per_warp
                    : p.idx_parts > 2         ? 1
                                              : static_cast<int>(std::clamp<long long>(pages / pages_per_ipw, 1, 8));
    p.idx_items_per_cta = kWarps * ipw;
    p.idx_chunks = (max_blocks * p.idx_parts + p.idx_items_per_cta - 1) / p.idx_items_per_cta;
    const int passes = (p.idx_ntiles + p.idx_nt_pass - 1) / p.idx_nt_pass;
    // FP8 indexer for one-query steps (<= 4 index heads) unless switched off: run C of session 5 measured it 0.5-4.4 us
    // faster on every one-query case (32 x 128K 164.0 -> 159.6 us), with no pick outside the strict 1.5-step rule.
    p.idx_fp8 = opt.idx_fp8 != 1 && opt.indexer == MsaImpl::kMma && p.rows <= 4 && p.idx_nt_pass == 1;
    // On wgmma by default (run E of session 5: 7% faster than the FP8 mma.sync at 32 x 128K, never slower), with one
    // CTA per work unit (the persistent grid keeps the mma.sync version).
    p.idx_wgmma = p.idx_fp8 && (opt.idx_fp8 == 0 || opt.idx_fp8 == 3) && opt.idx_persistent != 2;
    p.idx_smem = (p.idx_wgmma ? 1024 : 0) + static_cast<std::size_t>(kWarps) * 2 * (kBlock / p.idx_parts) * 72 +
                 (p.idx_fp8 ? static_cast<std::size_t>(kWarps) * (kBlock / p.idx_parts) * kFp8TabStride * sizeof(float)
                            : static_cast<std::size_t>(passes) * p.idx_nt_pass * 256 * sizeof(uint2));
    const long long units = static_cast<long long>(batch) * q_len * geo.num_kv_heads;
    // About 4 CTAs per SM; at <= 32 (query, kv head) units (the cluster-merge range) about 2 per SM: run 5 measured
    // 8 x 32K (32 units) at 36.3 us with 8 splits against 44.0 with 16; batch 1 keeps 16 splits (19.3 vs 22.4 us).
    const long long cta_target = (units <= 32 ? 2LL : 4LL) * sms;
    int splits = static_cast<int>(std::clamp<long long>((cta_target + units - 1) / units, 1, geo.topk));
    // Except with one query, more than 32 units and a short indexer (under 100 index pages per SM): then at most one
    // resident wave of attention CTAs (MSA_ATTN_MIN_CTAS per SM), 1-4 splits. Where the indexer is short, the attention
    // barely overlaps it, and a second wave of CTAs costs a whole round of page latencies. Session 14 sweeps, us, old
    // rule -> this one (run 8): 16 x 8K 43.5 -> 31.5, 16 x 32K 56.0 -> 39.6, 32 x 16K 54.4 -> 48.3, 24 x 32K 53.7 ->
    // 49.4, 32 x 32K 58.5 -> 54.6, 128 x 8K 107.0 -> 100.3, but 64 x 16K 69.9 -> 71.7 (one split, under a wave). Keeping
    // the old rule where this one gives a single split under a wave (run 9) won 1.7 us at 64 x 8K and 64 x 16K and
    // lost 8 us at 80 x 16K (76.4 -> 84.5). With longer indexers more splits shorten the last request's attention
    // (32 x 128K: 100.1 us at 4 splits, 102.2 at 3).
    if (q_len == 1 && units > 32 && pages < 100LL * sms)
        splits = static_cast<int>(std::clamp<long long>(static_cast<long long>(MSA_ATTN_MIN_CTAS) * sms / units, 1, 4));
    // One query and at most 16 units: 64 / units splits, which the rule below serves with 8-warp CTAs (attn8_kernel,
    // 64 of them). Session 15, run 9, us, the old choice (16 splits of 4-warp CTAs) -> this: 2 x 8K 14.9 -> 10.3, 2 x 32K
    // 15.8 -> 11.4, 2 x 128K 23.0 -> 19.2, 4 x 32K 19.8 -> 18.4, 4 x 8K 17.3 -> 17.3; 8 x 32K (32 units) stays with
    // 4-warp CTAs (25.2 against 30.5-40.8 with 8 warps and 2-16 splits).
    if (q_len == 1 && units <= 16) splits = static_cast<int>(std::min<long long>(64 / units, geo.topk));
    if (opt.attn_splits > 0) splits = std::min(opt.attn_splits, geo.topk);
    p.attn_pages_per_split = (geo.topk + splits - 1) / splits;
    p.attn_splits = (geo.topk + p.attn_pages_per_split - 1) / p.attn_pages_per_split;
    // L2 prefetch of the selected pages off unless asked: measured in run 4, the prefetches (1.2 MB at 1 x 32K) all leave from the one SM that runs
    // the request's top-k and made the indexer 40 us long (the kernel ends only when they are done).
    p.prefetch = opt.prefetch == 2;
    auto align = [](std::size_t x) { return (x + 255) & ~std::size_t(255); };
    const std::size_t u = static_cast<std::size_t>(units);
    const bool simt_attn = opt.attention == MsaImpl::kSimt;
    const std::size_t parts = simt_attn ? u * geo.topk * G : u * p.attn_splits * 16;
    p.scores_off = 0;
    p.sel_pages_off = align(static_cast<std::size_t>(batch) * p.rows * max_blocks * p.idx_parts * sizeof(float));
    p.partial_o_off = p.sel_pages_off + align(u * geo.topk * sizeof(int));
    p.partial_lse_off = p.partial_o_off + align(parts * kHeadDim * sizeof(float));
    p.counters_off = p.partial_lse_off + align(parts * sizeof(float));
    // counters: indexer arrivals [batch], attention arrivals [units], persistent indexer [2], ready flags [batch],
    // ready consumers [batch]
    p.total_bytes = p.counters_off + align((3 * static_cast<std::size_t>(batch) + u + 2) * sizeof(unsigned));
    // Per-warp pipeline when a CTA streams several pages (run 5: -1.6% at 32 x 128K, -0.6% at 64 x 64K, -1.1% and
    // -1.9% at 32 x 128K / 32 x 32K with 8 queries; +0.4 to +0.8 us at batch <= 8 with one page per CTA).
    p.attn_warp_pipe = opt.attn_warp_pipe == 2 || (opt.attn_warp_pipe == 0 && p.attn_pages_per_split >= 3);
    p.attn_topk = opt.indexer == MsaImpl::kMma && opt.attention == MsaImpl::kMma && !p.prefetch &&
                  (opt.attn_topk == 2 || (opt.attn_topk == 0 && (q_len > 1 || units <= 16)));  // MsaDecodeOptions::attn_topk
    p.attn_ready = opt.indexer == MsaImpl::kMma && opt.attention == MsaImpl::kMma &&
                   (opt.attn_ready == 2 || (opt.attn_ready == 0 && units >= 16));  // MsaDecodeOptions::attn_ready
    static bool attrs_set = false;  // kernel attributes, set once per process (outside capture)
    if (!attrs_set) {
        // Both kernels ask for the maximum shared-memory carveout, so alternating launches never reconfigure an SM.
        // Each kernel with the most dynamic shared memory any of its launches asks for.
        const std::pair<const void*, std::size_t> kernels[] = {
            {reinterpret_cast<const void*>(index_topk_kernel<1>), kIdxSmemMax},
            {reinterpret_cast<const void*>(index_topk_kernel<2>), kIdxSmemMax},
            {reinterpret_cast<const void*>(index_topk_kernel<4>), kIdxSmemMax},
            {reinterpret_cast<const void*>(index_topk_kernel<4, false, true>), kIdxSmemMax},
            {reinterpret_cast<const void*>(index_topk_kernel<1, true>), kIdxSmemFp8Max},
            {reinterpret_cast<const void*>(attn_kernel<false>), kAttnSmemWarp},
            {reinterpret_cast<const void*>(attn_kernel<true>), kAttnSmemWarp},
            {reinterpret_cast<const void*>(attn_kernel<false, true>), kAttnSmemLean},
            {reinterpret_cast<const void*>(attn8_kernel<false>), kAttnSmem8},
            {reinterpret_cast<const void*>(attn8_kernel<true>), kAttnSmem8}};
        for (const auto& [kernel, smem] : kernels) {
            detail::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
            detail::check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared));
        }
        // Clusters of up to 16 CTAs (16 splits) are beyond the portable 8.
        detail::check(cudaFuncSetAttribute(reinterpret_cast<const void*>(attn_kernel<true>),
                                           cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        detail::check(cudaFuncSetAttribute(reinterpret_cast<const void*>(attn8_kernel<true>),
                                           cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        attrs_set = true;
    }
    {  // persistent indexer: about one wave of resident CTAs
        int per_sm = 0;
        const void* k = p.idx_fp8            ? reinterpret_cast<const void*>(index_topk_kernel<1, true>)
                        : p.idx_wq8          ? reinterpret_cast<const void*>(index_topk_kernel<4, false, true>)
                        : p.idx_nt_pass == 1 ? reinterpret_cast<const void*>(index_topk_kernel<1>)
                        : p.idx_nt_pass == 2 ? reinterpret_cast<const void*>(index_topk_kernel<2>)
                                             : reinterpret_cast<const void*>(index_topk_kernel<4>);
        detail::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kWarps * 32, p.idx_smem));
        const long long wave = static_cast<long long>(std::max(per_sm, 1)) * sms;
        const long long total = static_cast<long long>(p.idx_chunks) * batch;
        // Persistent only when asked: run 5 (126-register indexer) measured one CTA per unit faster at 32 x 128K
        // (165.4 vs 171.5 us), 64 x 64K (169.4 vs 176.0) and 8 x 512K (204.7 vs 219.0).
        p.idx_persistent = opt.idx_persistent == 2;
        long long grid = std::min(total, wave);
        if (opt.idx_ctas > 0) grid = std::min<long long>(grid, opt.idx_ctas);
        p.idx_grid = static_cast<int>(grid);
    }
    // Cluster merge: chosen when there are several splits and (auto) at most 32 (query, kv head) units, where the
    // merge's latency matters (run 4: -5 to -9 us at batch 1; +6 us with 4-CTA clusters at 32 x 128K); used only if
    // the device can place such a cluster.
    const bool want_cluster = p.attn_splits > 1 && opt.attention == MsaImpl::kMma &&
                              (opt.attn_cluster == 2 || (opt.attn_cluster == 0 && units <= 32));
    // 8 warps per CTA (16-token slices: a shorter chain per warp) only with one split or the cluster merge; by
    // default for a cluster merge of at most 64 CTAs (MsaDecodeOptions::attn_warps).
    const bool warps8 = opt.attn_warps == 8 || (opt.attn_warps == 0 && want_cluster && units * p.attn_splits <= 64);
    p.attn_warps = warps8 && opt.attention == MsaImpl::kMma && (want_cluster || p.attn_splits == 1) ? 8 : 4;
    if (p.attn_warps == 8) p.attn_warp_pipe = false;
    if (want_cluster) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(static_cast<unsigned>(batch * q_len), static_cast<unsigned>(geo.num_kv_heads),
                           static_cast<unsigned>(p.attn_splits));
        cfg.blockDim = dim3(p.attn_warps * 32);
        cfg.dynamicSmemBytes = attn_smem(p);
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 1;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = static_cast<unsigned>(p.attn_splits);
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int clusters = 0;
        p.attn_cluster = cudaOccupancyMaxActiveClusters(&clusters, attn_kernel_for(true, p.attn_warps, false), &cfg) ==
                             cudaSuccess &&
                         clusters > 0;
        (void)cudaGetLastError();  // a refused query leaves no sticky error behind
        if (!p.attn_cluster && p.attn_splits > 1) p.attn_warps = 4;  // 8 warps need the cluster merge
    }
    // Early dependent launch by the indexer unless the attention is a 4-warp cluster launch; grid-order attention CTAs unless
    // asked. Session 13 sweep (docs/cuda-notes.md section 20), us, late trigger -> early: 32 x 128K 125.4 -> 120.3,
    // 64 x 64K 137.2 -> 130.1, 32 x 32K 68.9 -> 63.7, 32 x 128K with 8 queries 295.3 -> 285.5; with the cluster merge
    // (then with the 8-warp kernel of session 14 at batch 1) it lost (1 x 8K 12.1 -> 15.6, 1 x 128K 18.4 -> 19.0,
    // 8 x 512K 115.6 -> 118.2). Request-major CTAs lost
    // everywhere they changed anything (32 x 128K 125.4 -> 129.7 with the late trigger, 120.3 -> 122.7 with the early).
    // The 8-warp attention (batch 1) takes the early launch (session 15, run 5, us, late -> early: 1 x 1K 7.5 -> 6.7,
    // 1 x 8K 9.9 -> 8.9, 1 x 32K 11.6 -> 10.3, 1 x 128K 14.7 -> 14.4, 1 x 512K 31.5 -> 31.6).
    p.idx_early_trigger =
        opt.idx_trigger == 2 || (opt.idx_trigger == 0 && (!p.attn_cluster || p.attn_warps == 8));
    p.attn_req_major = !p.attn_cluster && opt.attn_order == 2;
    // The lean 4-warp attention (4 CTAs per SM) where asked, or (auto) where each CTA streams 16 pages (one split). Session
    // 18, run 6, us, 3 -> 4 CTAs per SM: one split: 8 queries at 32 x 128K 253.4 -> 247.0, 32 x 32K 165.5 -> 161.5, 64 x
    // 200K 625.8 -> 616.7, 128 x 50K 654.3 -> 653.2, one query at 128 x 8K 101.1 -> 90.2; 3-4 splits (4-6 pages per CTA,
    // where its two pipeline stages instead of three leave more of each page's latency exposed): 8 queries at 8 x 32K
    // 64.6 -> 68.4 and 8 x 200K 107.9 -> 111.3, one query at 32 x 32K 54.3 -> 57.8 and 32 x 128K 100.8 -> 103.6.
    p.attn_lean = opt.attention == MsaImpl::kMma && p.attn_warps == 4 && !p.attn_cluster &&
                  (opt.attn_lean == 2 || (opt.attn_lean == 0 && p.attn_pages_per_split >= 16));
    return p;
}

void set_decode_trace(unsigned long long* buf) { g_trace = buf; }

void init_decode_workspace(const MsaDecodePlan& p, void* workspace, cudaStream_t stream) {
    detail::check(cudaMemsetAsync(static_cast<std::uint8_t*>(workspace) + p.counters_off, 0,
                                  p.total_bytes - p.counters_off, stream));
}

void msa_decode(const MsaDecodePlan& p, const MsaDecodeArgs& a, cudaStream_t stream) {
    auto* ws = static_cast<std::uint8_t*>(a.workspace);
    auto* scores = reinterpret_cast<float*>(ws + p.scores_off);
    auto* sel_pages = reinterpret_cast<int*>(ws + p.sel_pages_off);
    auto* po = reinterpret_cast<float*>(ws + p.partial_o_off);
    auto* pl = reinterpret_cast<float*>(ws + p.partial_lse_off);
    auto* counters = reinterpret_cast<unsigned*>(ws + p.counters_off);
    const int nkv = p.geo.num_kv_heads, nq = p.geo.num_q_heads, G = nq / nkv;
    const bool mma_idx = p.opt.indexer == MsaImpl::kMma;
    const std::size_t units = static_cast<std::size_t>(p.batch) * p.q_len * nkv;
    unsigned* ready = p.attn_ready ? counters + p.batch + units + 2 : nullptr;
    if (mma_idx) {
        const IdxParams ip{a.iq, a.ik_cache, a.page_table, a.seq_lens, scores, sel_pages, a.topk_out, counters,
                           a.k_cache, a.v_cache, counters + p.batch + units, ready,
                           p.max_blocks, p.q_len, nkv, p.rows, p.geo.topk, p.idx_ntiles, p.idx_items_per_cta,
                           p.idx_parts, p.idx_chunks, p.batch, p.prefetch, p.idx_persistent, kMul, p.idx_wgmma,
                           g_trace, p.attn_topk, p.idx_early_trigger};
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = p.idx_persistent ? dim3(p.idx_grid) : dim3(p.idx_chunks, p.batch);
        cfg.blockDim = dim3(kWarps * 32);
        cfg.dynamicSmemBytes = p.idx_smem;
        cfg.stream = stream;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = p.opt.pdl && p.opt.idx_pdl != 1 ? 1 : 0;
        switch (p.idx_nt_pass) {
            case 1:
                if (p.idx_fp8)
                    detail::check(cudaLaunchKernelEx(&cfg, index_topk_kernel<1, true>, ip));
                else
                    detail::check(cudaLaunchKernelEx(&cfg, index_topk_kernel<1>, ip));
                break;
            case 2: detail::check(cudaLaunchKernelEx(&cfg, index_topk_kernel<2>, ip)); break;
            default:
                if (p.idx_wq8)
                    detail::check(cudaLaunchKernelEx(&cfg, index_topk_kernel<4, false, true>, ip));
                else
                    detail::check(cudaLaunchKernelEx(&cfg, index_topk_kernel<4>, ip));
                break;
        }
    } else {
        detail::launch_simt_indexer(p, a, scores, stream);
    }
    if (p.opt.attention == MsaImpl::kSimt) {
        detail::launch_simt_attention(p, a, po, pl, stream);
        return;
    }
    const AttnParams ap{a.q, a.k_cache, a.v_cache, a.seq_lens, a.topk_out, mma_idx ? sel_pages : nullptr,
                        a.page_table, a.out, po, pl, counters + p.batch, ready, ready ? ready + p.batch : nullptr,
                        p.q_len, nq, nkv, G, p.geo.topk,
                        p.max_blocks, p.attn_splits, p.attn_pages_per_split, p.attn_warp_pipe, kMul, g_trace,
                        p.attn_topk ? scores : nullptr, p.idx_parts, p.attn_req_major};
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.batch * p.q_len, nkv, p.attn_splits);
    cfg.blockDim = dim3(p.attn_warps * 32);
    cfg.dynamicSmemBytes = attn_smem(p);
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    int na = 0;
    if (p.opt.pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (p.attn_cluster) {
        attr[na].id = cudaLaunchAttributeClusterDimension;
        attr[na].val.clusterDim.x = 1;
        attr[na].val.clusterDim.y = 1;
        attr[na++].val.clusterDim.z = static_cast<unsigned>(p.attn_splits);
    }
    cfg.attrs = attr;
    cfg.numAttrs = na;
    detail::check(cudaLaunchKernelEx(&cfg, attn_kernel_for(p.attn_cluster, p.attn_warps, p.attn_lean), ap));
}

}  // namespace msa::cuda
