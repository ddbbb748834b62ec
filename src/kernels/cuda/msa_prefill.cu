// MSA prefill on Hopper: indexer (tensor cores, FP16 operands exact for E4M3 x NVFP4), keyed top-k, and the
// "KV outer, gather Q" sparse attention. Host API and layouts: msa_prefill.h; notes: docs/cuda-notes.md (sections
// 6-11: the mma.sync kernels, 18-19: the wgmma kernels).
//
// Per query window (whole indexer tiles of one or more sequences), six launches:
//  1. The indexer. CTA = (tile of index rows of one sequence, up to 16 index-K blocks); each block is dequantised
//     once into an FP16 tile (exact: e2m1 * scale has at most 6 significant bits) and multiplied with the rows' E4M3
//     queries, reduced to the block maximum per row. Only history blocks are scored (the local block is always
//     selected, so its masked score is never needed). Three kernels:
//     - pf_index_ss_kernel<IdxExact> (default, MsaIdxKernel::smem_q): 256 rows, converted to FP16 once per item into
//       shared memory; both wgmma operands from shared memory, two M = 64 passes in flight;
//     - pf_index_ss_kernel<IdxQ8kv4> (MsaPrefillOptions::idx_q8kv4): the same on FP8 wgmma in msa.md's Q8KV4 contract
//       (index keys rounded once to E4M3, the raw E4M3 query rows);
//     - pf_index_tiled_kernel<IdxQ8kv4> (default with idx_q8kv4: MsaPrefillOptions::idx_key_tiles): the same MMAs on
//       key tiles that pf_key_tiles_kernel converted once per call (before the first window) into the workspace,
//       streamed by TMA bulk copies;
//     - pf_index_wg_kernel (MsaIdxKernel::pass_q): 256 rows in four M = 64 passes, each pass's rows loaded into A
//       fragments per block, blocks copied by cp.async (double buffered);
//     - pf_index_kernel (MsaPrefillOptions::wgmma = false): 128 rows, mma.sync with ldmatrix B fragments per warp.
//  2. pf_topk_kernel: one warp per (token, index head): keyed 16-bit top-k of msa.md section 3, local block last;
//     counts the picks per (KV head, block) list.
//  3. pf_scan_kernel: one CTA: exclusive scans of list sizes and of kQc-query chunks, one descriptor per chunk
//     (entries, record, block, head), counters reset for the next window.
//  4. pf_fill_kernel: every pick appends (token, slot) to its list.
//  5. pf_attn_wg_kernel<false> (default; <true>: the Q8KV4 contract, P V on FP8 wgmma; pf_attn_kernel without
//     wgmma): persistent CTAs over the chunks: the chunk's K and V block is dequantised once into FP16 tiles; the
//     group's 16 query heads of a gathered query are 16 MMA rows (4 queries per warpgroup with wgmma, one per warp
//     with mma.sync): S = Q K^T, causal mask on the local block,
//     softmax over the block, O = P V, normalised partial O (FP16) and base-2 LSE per (token, group, slot).
//  6. pf_combine_kernel: per token, the <= topk partials of every head merged by LSE.
// All FP16 tiles use one permuted dimension order (see dequant_page): table-free NVFP4 decode, 16-byte query loads
// and 16-byte partial-output stores (the first version's byte-LUT and 2-byte loads bound both big kernels on the
// L1/shared-memory pipe: docs/cuda-notes.md section 7).
#include "msa_decode_internal.h"
#include "msa_device.cuh"
#include "msa_prefill.h"

#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <stdexcept>
#include <type_traits>

namespace msa::cuda {
namespace {

using namespace detail;

constexpr int kQc = 32;  // gathered queries per attention work chunk (its K/V block is dequantised once for them)
constexpr int kTileBytes = kBlock * kHeadDim * 2;  // FP16 [128][128] tile
constexpr int kScanThreads = 1024;

__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const void* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a swizzled FP16 [128][128] tile.
__device__ __forceinline__ int tile_off(int row, int chunk) {
    return row * 256 + (((chunk ^ row) & 7) | (chunk & 8)) * 16;
}

// FP16 tiles use a permuted dimension order (the same for K, V and index keys): word p (0..3, 4 bytes) of 16-byte
// chunk j holds the f16x2 (dim d, dim d + 4) with d = 32p + 8(j >> 2) + (j & 3). The MMA reduction (K) and output (V)
// dimensions only need the same order on both operands, and with it an MMA lane with column pair c owns exactly the
// 32 contiguous dims [32c, 32c + 32): its query fragments come from two 16-byte loads per row and its partial
// outputs go out as four 16-byte stores per row (instead of 32 two-byte loads and 32 four-byte stores), and the
// NVFP4 decode needs no table: fp4x8's (n_i, n_{i+4}) pairs are exactly the tile words.
constexpr std::uint32_t kH2x16384 = 0x74007400u;  // f16x2 (2^14, 2^14)
// 32 NVFP4 values (16 bytes: dims 32 ch + 0..31 of a row) and their two E4M3 scales (sc, low 16 bits) -> the row's
// words of the permuted FP16 tile: o[j] = word ch of chunk j. fp4x8 places e2m1 as FP16 e2m1 * 2^-14; then
// - kScaled = false: o = (P * 2^14) * scale, the exact value (at most 6 significant bits, >= 2^-10: a normal FP16);
// - kScaled = true: o = P * (scale * 2^7) = value * 2^-7, one multiply instead of two (scale * 2^14 could overflow
//   FP16, scale * 2^7 <= 57344 cannot); also exact: values are multiples of 2^-10 with <= 6 significant bits, so
//   value * 2^-7 is a multiple of 2^-17 (FP16 subnormals step by 2^-24) below 21. Products with it are the exact
//   ones times 2^-7, so FP32 sums are too (no FP32 subnormals arise: |product| >= 2^-26).
template <bool kScaled>
__device__ __forceinline__ void dequant_words(const uint4& d, std::uint32_t sc, std::uint32_t (&o)[16]) {
    std::uint32_t sh = e4m3x2_to_h2(sc);
    if constexpr (kScaled) sh = hmul2(sh, 0x58005800u);  // f16x2 (2^7, 2^7)
    const std::uint32_t s0 = prmt(sh, sh, 0x1010), s1 = prmt(sh, sh, 0x3232);
    const std::uint32_t w[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        std::uint32_t P[4];
        fp4x8(w[m], Mul{}, P);  // constant shifts (MSA_FP4_SHIFTS=1)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            o[4 * m + i] = kScaled ? hmul2(P[i], m < 2 ? s0 : s1) : hmul2(hmul2(P[i], kH2x16384), m < 2 ? s0 : s1);
    }
}
// Where row `row`'s 32-dim chunk ch (0..3) of a (page, head) record (9216 bytes) sits: values, then the two scales.
__device__ __forceinline__ int rec_values_off(int row, int ch) {
    return row * 64 + ch * 16;
}
__device__ __forceinline__ int rec_scales_off(int row, int ch) {
    return kBlock * 64 + row * 8 + 2 * ch;
}
// Tile layouts: byte offset of 16-byte chunk j (8 permuted dims) of row (key) `row`.
// - mma.sync tiles (ldmatrix operands): rows of 256 bytes, chunks XOR-swizzled by the row (tile_off).
// - wgmma tiles (shared-memory B operand, K-major, no swizzle): 8-row x 16-byte core matrices of 128 contiguous
//   bytes; core matrix (row octet, chunk j) at j * 2048 + octet * 128, so the k16 step ks (chunks 2ks, 2ks + 1) starts
//   at ks * 4096 with 2048 bytes between its two core matrices along K and 128 along N.
struct SwizzledTile {
    __device__ int operator()(int row, int j) const { return tile_off(row, j); }
};
struct WgTile {
    __device__ int operator()(int row, int j) const { return j * 2048 + (row >> 3) * 128 + (row & 7) * 16; }
};
constexpr unsigned kWgStepBytes = 4096, kWgLead = 2048, kWgStride = 128;
// One thread's four (row, 32-dim chunk) pieces of a record (global or shared memory), loaded apart from their
// decoding so that a kernel can issue the loads early (all of them before the first use; a record's loads do not
// wait behind the stores of another's decoding). Rows >= valid load as zeros, which decode to zero words (stale
// cache bytes never reach the MMAs). Three splits over 128 threads, chunk ch = tid & 3:
// - rows: piece k is row (tid + 128 k) >> 2 (dequant_page);
// - key pairs: pieces 2m and 2m + 1 are rows 2 kp and 2 kp + 1 of key pair kp = (tid + 128 m) >> 2 (dequant_pieces_vt);
// - key quads: with j = tid >> 2, pieces k = 2u + e are rows 16 (j >> 2) + 2 (j & 3) + 8u + e (dequant_vt_q8).
enum class Split { rows, pairs, quads };
struct RawPieces {
    uint4 v[4];
    unsigned short sc[4];
    __device__ static int row_of(int tid, int k, Split split) {
        const int j = tid >> 2;
        return split == Split::pairs   ? 2 * ((tid + 128 * (k >> 1)) >> 2) + (k & 1)
               : split == Split::quads ? 16 * (j >> 2) + 2 * (j & 3) + 8 * (k >> 1) + (k & 1)
                                       : (tid + 128 * k) >> 2;
    }
    __device__ void load(const unsigned char* rec, int valid, int tid, Split split) {
        const int ch = tid & 3;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int row = row_of(tid, k, split);
            v[k] =
                row < valid ? *reinterpret_cast<const uint4*>(rec + rec_values_off(row, ch)) : make_uint4(0, 0, 0, 0);
            sc[k] = row < valid ? *reinterpret_cast<const unsigned short*>(rec + rec_scales_off(row, ch)) : 0;
        }
    }
};
// A record's pieces (row split) -> an FP16 [128][128] tile in the permuted dim order (kScaled: values * 2^-7, see
// dequant_words). 128 threads; every 4-byte store of a warp hits 8 rows x 16 B in distinct bank groups with either
// layout, so the stores are conflict free.
// kE4m3: the values rounded once to E4M3 (the Q8KV4 contract's keys), still held exactly in FP16.
template <bool kScaled = false, bool kE4m3 = false, class Layout>
__device__ __forceinline__ void dequant_pieces(const RawPieces& raw, unsigned char* tile, int tid, Layout layout) {
    const int ch = tid & 3;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int row = RawPieces::row_of(tid, k, Split::rows);
        std::uint32_t o[16];
        dequant_words<kScaled>(raw.v[k], raw.sc[k], o);
#pragma unroll
        for (int j = 0; j < 16; ++j)
            *reinterpret_cast<std::uint32_t*>(tile + layout(row, j) + 4 * ch) = kE4m3 ? h2_round_e4m3(o[j]) : o[j];
    }
}
template <class Layout>
__device__ __forceinline__ void dequant_page(const unsigned char* rec, int valid, unsigned char* tile, int tid,
                                             Layout layout) {
    RawPieces raw;
    raw.load(rec, valid, tid, Split::rows);
    dequant_pieces(raw, tile, tid, layout);
}
// V record -> the transposed wgmma tile of P V (B = V^T: N = output dims, K = keys): row n holds the 128 keys of
// one dim (8-key core-matrix rows). Accumulator column 8 jj + 2 c + e of MMA lane c (jj = 4 q + i) is dim
// 32 q + 8 c + 2 i + e: lane c owns the 16-byte pieces [32 q + 8 c, + 8) of a row, so each 16-byte store
// instruction of a warp writes 64 contiguous bytes per row (whole 32-byte sectors; with contiguous 32-dim pieces per
// lane every store half-filled its sectors). One thread decodes a key pair's 32-dim chunk and pairs the two keys per
// dim (f16x2 words along K). Stores: 2-way bank conflicts (two key octets per warp), once per 32 gathered queries.
__device__ __forceinline__ int vt_row_of_dim(int dim) {
    return 8 * (4 * (dim >> 5) + ((dim >> 1) & 3)) + 2 * ((dim >> 3) & 3) + (dim & 1);
}
// A V record's pieces (key-pair split) -> the V^T tile.
__device__ __forceinline__ void dequant_pieces_vt(const RawPieces& raw, unsigned char* tile, int tid) {
    const int ch = tid & 3;
#pragma unroll
    for (int m = 0; m < 2; ++m) {
        const int kp = (tid + 128 * m) >> 2;
        std::uint32_t o0[16], o1[16];
        dequant_words<false>(raw.v[2 * m], raw.sc[2 * m], o0);
        dequant_words<false>(raw.v[2 * m + 1], raw.sc[2 * m + 1], o1);
        unsigned char* base = tile + (kp >> 2) * 2048 + (kp & 3) * 4;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int d = 32 * ch + 8 * (j >> 2) + (j & 3);  // word ch of chunk j: dims (d, d + 4)
            const int n0 = vt_row_of_dim(d), n1 = vt_row_of_dim(d + 4);
            *reinterpret_cast<std::uint32_t*>(base + (n0 >> 3) * 128 + (n0 & 7) * 16) = prmt(o0[j], o1[j], 0x5410);
            *reinterpret_cast<std::uint32_t*>(base + (n1 >> 3) * 128 + (n1 & 7) * 16) = prmt(o0[j], o1[j], 0x7632);
        }
    }
}
// A V record's pieces (key-quad split) -> the E4M3 V^T tile of the Q8KV4 attention (pf_attn_wg_kernel<true>): row
// n = vt_row_of_dim(dim) holds the dim's 128 keys as 128 bytes (8-row x 16-byte core matrices, chunk j of 16 keys at
// j * 2048 + (n >> 3) * 128 + (n & 7) * 16). Within a 16-key chunk, byte 4c + 2u + e holds key 8u + 2c + e: the
// order in which an m64n128 accumulator lane c holds its S values, so the lane's probabilities are its FP8 A fragments
// for P V without shuffles (q8_probs). A thread's 4 keys 16 (j >> 2) + 2 (j & 3) + {0, 1, 8, 9} fill one 4-byte word
// per dim. Values: exactly dequantised, rounded once to E4M3.
__device__ __forceinline__ void dequant_vt_q8(const RawPieces& raw, unsigned char* tile, int tid) {
    const int j = tid >> 2, ch = tid & 3;
    std::uint32_t o[4][16];
#pragma unroll
    for (int k = 0; k < 4; ++k) dequant_words<false>(raw.v[k], raw.sc[k], o[k]);
    unsigned char* base = tile + (j >> 2) * 2048 + 4 * (j & 3);
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {  // f16x2 word jj of a piece: dims (d, d + 4)
        const int d = 32 * ch + 8 * (jj >> 2) + (jj & 3);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const std::uint32_t sel = h == 0 ? 0x5410u : 0x7632u;  // dim d (low halves) or d + 4 (high halves)
            const int n = vt_row_of_dim(d + 4 * h);
            *reinterpret_cast<std::uint32_t*>(base + (n >> 3) * 128 + (n & 7) * 16) =
                h2x2_to_e4m3x4(prmt(o[0][jj], o[1][jj], sel), prmt(o[2][jj], o[3][jj], sel));
        }
    }
}
// A K record's pieces (row split) -> the E4M3 K tile of FP8 scores (pf_attn_wg_kernel<true, true>): K-major like
// the V^T tile, 16-byte core-matrix rows; key n's half u of k32 step ks (logical k 16u .. 16u + 15) sits at
// (2 ks + u) * 2048 + (n >> 3) * 128 + (n & 7) * 16, and its word c holds dims 32c + 8ks + 4u + 0..3. With that
// order an MMA lane c's A fragments are plain words of its query rows' bytes [32c, 32c + 32) (q8s_frags_from_raw):
// no conversion of the queries at all. Values: exactly dequantised, rounded once to E4M3. Stores: a warp's 8 rows x
// 4 pieces fill one 128-byte core matrix per store instruction (conflict free).
constexpr unsigned kQ8sLead = 2048, kQ8sStepBytes = 2 * kQ8sLead;
constexpr std::size_t kQ8sTileBytes = std::size_t{kBlock} * kHeadDim;  // 16 KB of E4M3
__device__ __forceinline__ void dequant_k_q8s(const RawPieces& raw, unsigned char* tile, int tid) {
    const int ch = tid & 3;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int row = RawPieces::row_of(tid, k, Split::rows);
        std::uint32_t o[16];  // o[4m + i]: dims (32ch + 8m + i, + 4)
        dequant_words<false>(raw.v[k], raw.sc[k], o);
        unsigned char* base = tile + (row >> 3) * 128 + (row & 7) * 16 + 4 * ch;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            const std::uint32_t a = h2x2_to_e4m3x4(o[4 * ks], o[4 * ks + 1]);      // dims +0, +4, +1, +5
            const std::uint32_t b = h2x2_to_e4m3x4(o[4 * ks + 2], o[4 * ks + 3]);  // dims +2, +6, +3, +7
            *reinterpret_cast<std::uint32_t*>(base + 2 * ks * kQ8sLead) = prmt(a, b, 0x6420);        // +0 .. +3
            *reinterpret_cast<std::uint32_t*>(base + (2 * ks + 1) * kQ8sLead) = prmt(a, b, 0x7531);  // +4 .. +7
        }
    }
}
// The E4M3 A fragments of FP8 scores from a lane's raw query bytes (load_rows_raw: x[h][v] = row r + 8h, bytes
// 32c + 16v ..): step ks, register 2u + h = row r + 8h, dims 32c + 8ks + 4u + 0..3 (dequant_k_q8s's order).
__device__ __forceinline__ void q8s_frags_from_raw(const uint4 (&x)[2][2], std::uint32_t (&a)[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint4& q = x[h][ks >> 1];
            a[ks][h] = (ks & 1) ? q.z : q.x;
            a[ks][2 + h] = (ks & 1) ? q.w : q.y;
        }
}
// MMA A fragments of rows ra and rb (E4M3, 128 bytes each; null: a zero row) for the permuted tile order: k-step ks
// pairs tile chunks 2ks and 2ks + 1, i.e. dims 32c + 8(ks >> 1) + 2(ks & 1) + {0, 4} and + {1, 5}. Exact.
// Split in two so that a kernel can issue the loads early: load_rows_raw (this lane's 32 bytes of each row) and
// a_perm_from_raw (the conversion).
__device__ __forceinline__ void load_rows_raw(const std::uint8_t* ra, const std::uint8_t* rb, int c, uint4 (&x)[2][2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const std::uint8_t* row = h == 0 ? ra : rb;
#pragma unroll
        for (int v = 0; v < 2; ++v)
            x[h][v] = row ? *reinterpret_cast<const uint4*>(row + 32 * c + 16 * v) : make_uint4(0u, 0u, 0u, 0u);
    }
}
__device__ __forceinline__ void a_perm_from_raw(const uint4 (&x)[2][2], std::uint32_t (&a)[8][4]) {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
        const int m = ks >> 1;  // 8-byte group: words 2m (dims +0..3) and 2m + 1 (dims +4..7)
        const std::uint32_t sel0 = (ks & 1) ? 0x0062u : 0x0040u, sel1 = (ks & 1) ? 0x0073u : 0x0051u;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint4& q = x[h][m >> 1];
            const std::uint32_t lo = (m & 1) ? q.z : q.x, hi = (m & 1) ? q.w : q.y;
            a[ks][h] = e4m3x2_to_h2(prmt(lo, hi, sel0));
            a[ks][2 + h] = e4m3x2_to_h2(prmt(lo, hi, sel1));
        }
    }
}
__device__ __forceinline__ void load_a_perm(const std::uint8_t* ra, const std::uint8_t* rb, int c,
                                            std::uint32_t (&a)[8][4]) {
    uint4 x[2][2];
    load_rows_raw(ra, rb, c, x);
    a_perm_from_raw(x, a);
}
// ---------------------------------------------------------------- 1. indexer
struct PfIdx {
    const std::uint8_t* iq;
    const std::uint8_t* ik_cache;
    const int* page_table;
    const int4* items;
    float* scores;
    int max_blocks, row_base, item0;
    const unsigned char* key_tiles;  // MsaPrefillOptions::idx_key_tiles: the converted index-key tiles
    const int* seq_blk_base;         // ... and the first plan block of each sequence
};
constexpr std::size_t kIdxSmem = 2 * kPageHeadBytes + kTileBytes;
// One indexer work item (PfIdx::items): rows [row0, row0 + nrows) of one sequence against its index-key blocks
// [b0, b1), whose pages stream through a two-stage cp.async buffer (128 threads). Shared memory (kIdxSmem): the two
// stages, then the FP16 tile. The constructor starts the first block's copy.
struct IdxItemHeader {
    int seq, row0, nrows, b0, b1;
    const int* pt;  // the sequence's page-table row
    __device__ explicit IdxItemHeader(const PfIdx& p) {
        const int4 it0 = p.items[2 * (p.item0 + blockIdx.x)], it1 = p.items[2 * (p.item0 + blockIdx.x) + 1];
        seq = it0.x;
        row0 = it0.y;
        nrows = it0.z;
        b0 = it0.w;
        b1 = it1.x;
        pt = p.page_table + static_cast<std::size_t>(it0.x) * p.max_blocks;
    }
    __device__ const unsigned char* record(const PfIdx& p, int b) const {
        return p.ik_cache + static_cast<std::size_t>(pt[b]) * kPageHeadBytes;
    }
};
struct IdxItem : IdxItemHeader {
    unsigned char* stage;
    unsigned char* tile;
    __device__ IdxItem(const PfIdx& p, unsigned char* smem, int tid)
        : IdxItemHeader(p), stage(smem), tile(smem + 2 * kPageHeadBytes) {
        copy_page(p, stage, b0, tid);
        cp_async_commit();
    }
    __device__ void copy_page(const PfIdx& p, unsigned char* dst, int b, int tid) const {
        const unsigned char* src = record(p, b);
        for (int u = tid; u < kPageHeadBytes / 16; u += 128) cp_async16(dst + u * 16, src + u * 16);
    }
    // Starts block b + 1's copy into the other stage and waits until block b (the i-th) has landed for every thread;
    // returns block b's raw page.
    __device__ const unsigned char* next_stage(const PfIdx& p, int b, int i, int tid) const {
        if (b + 1 < b1) copy_page(p, stage + ((i + 1) & 1) * kPageHeadBytes, b + 1, tid);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        return stage + (i & 1) * kPageHeadBytes;
    }
};

__global__ void __launch_bounds__(128) pf_index_kernel(const PfIdx p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const IdxItem item(p, smem, tid);
    const int row0 = item.row0, nrows = item.nrows, b0 = item.b0, b1 = item.b1;
    unsigned char* tile = item.tile;
    // A fragments: this warp's 32 index rows (2 m-tiles) x 128 dims (8 k-steps), E4M3 -> FP16 exactly.
    std::uint32_t a[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        const int ra = 32 * warp + 16 * mt + r, rb = ra + 8;
        load_a_perm(ra < nrows ? p.iq + static_cast<std::size_t>(row0 + ra) * kHeadDim : nullptr,
                    rb < nrows ? p.iq + static_cast<std::size_t>(row0 + rb) * kHeadDim : nullptr, c, a[mt]);
    }
    // ldmatrix row addresses: lanes 0-7 / 8-15 / 16-23 / 24-31 give keys n0+0..7 (dims chunk 2ks), n0+0..7 (2ks+1),
    // n0+8..15 (2ks), n0+8..15 (2ks+1): b0/b1 of n-tile n0 then of n-tile n0+8.
    const int lkey = ((lane >> 4) << 3) + (lane & 7), lchunk = (lane >> 3) & 1;
    for (int b = b0, i = 0; b < b1; ++b, ++i) {
        dequant_page(item.next_stage(p, b, i, tid), kBlock, tile, tid, SwizzledTile{});
        __syncthreads();
        float mx[2][2] = {{-CUDART_INF_F, -CUDART_INF_F}, {-CUDART_INF_F, -CUDART_INF_F}};
#pragma unroll 1
        for (int nc = 0; nc < 4; ++nc) {
            float acc[2][4][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < 8; ++ks) {
                std::uint32_t bf[2][4];
#pragma unroll
                for (int np = 0; np < 2; ++np) {
                    const int key = nc * 32 + np * 16 + lkey;
                    ldsm_x4(bf[np], tile + tile_off(key, 2 * ks + lchunk));
                }
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int np = 0; np < 2; ++np) {
                        mma16816(acc[mt][2 * np], a[mt][ks], bf[np][0], bf[np][1]);
                        mma16816(acc[mt][2 * np + 1], a[mt][ks], bf[np][2], bf[np][3]);
                    }
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    mx[mt][0] = fmaxf(mx[mt][0], fmaxf(acc[mt][nt][0], acc[mt][nt][1]));
                    mx[mt][1] = fmaxf(mx[mt][1], fmaxf(acc[mt][nt][2], acc[mt][nt][3]));
                }
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v = mx[mt][h];
                v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
                v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
                const int row = 32 * warp + 16 * mt + 8 * h + r;
                if (c == 0 && row < nrows)
                    p.scores[static_cast<std::size_t>(row0 + row - p.row_base) * p.max_blocks + b] = v;
            }
    }
    cp_async_wait<0>();
}

// The same indexer on wgmma (default): the CTA's 4 warps are one warpgroup; a tile has up to 256 index rows, run as
// four M = 64 passes (pass mt: warp w supplies rows 64 mt + 16 w .. + 15 as registers), and each block is
// dequantised once into a wgmma tile (WgTile) that the tensor cores read as B (N = the block's 128 keys) without a
// per-warp ldmatrix copy: the shared-memory traffic of the B fragments, which bound the mma.sync version
// (docs/cuda-notes.md section 9), falls by the 4 warps. A pass's query rows are not kept in registers for the whole
// tile but loaded (L2) one pass ahead, so the dequantisation of a block serves 256 rows within the registers of 4 CTAs
// per SM. Same exact products (E4M3 x exactly dequantised NVFP4 in FP16), FP32 accumulation.
constexpr int kIdxWgRows = 256;
// Block maxima of one M = 64 pass (this warp's rows wrow + r and wrow + r + 8) -> the score rows.
__device__ __forceinline__ void store_pass_maxima(const PfIdx& p, const float (&acc)[16][4], int wrow, int nrows,
                                                  int row0, int b, int lane, float scale = 1.f) {
    const int r = lane >> 2, c = lane & 3;
    // a tree over each row's 32 values (depth 5): as a running maximum the FMNMX were a dependent chain of 17 and
    // about 39% of the Q8KV4 indexer's stall samples (session 21, ncu source counters)
    float m[2][16];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        m[0][j] = fmaxf(acc[j][0], acc[j][1]);
        m[1][j] = fmaxf(acc[j][2], acc[j][3]);
    }
#pragma unroll
    for (int step = 0; step < 4; ++step) {
        const int w = 8 >> step;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (j < w) {
                m[0][j] = fmaxf(m[0][j], m[0][j + w]);
                m[1][j] = fmaxf(m[1][j], m[1][j + w]);
            }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float v = m[h][0];
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
        const int row = wrow + 8 * h + r;
        if (c == 0 && row < nrows)
            p.scores[static_cast<std::size_t>(row0 + row - p.row_base) * p.max_blocks + b] = v * scale;
    }
}
__global__ void __launch_bounds__(128, 4) pf_index_wg_kernel(const PfIdx p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const IdxItem item(p, smem, tid);
    const int row0 = item.row0, nrows = item.nrows, b0 = item.b0, b1 = item.b1;
    unsigned char* tile = item.tile;
    auto pass_rows = [&](int mt, uint4 (&x)[2][2]) {
        const int ra = 64 * mt + 16 * warp + r, rb = ra + 8;
        load_rows_raw(ra < nrows ? p.iq + static_cast<std::size_t>(row0 + ra) * kHeadDim : nullptr,
                      rb < nrows ? p.iq + static_cast<std::size_t>(row0 + rb) * kHeadDim : nullptr, c, x);
    };
    const int npass = (nrows + 63) >> 6;  // CTA-uniform
    uint4 qx[2][2];
    pass_rows(0, qx);
    const std::uint64_t desc0 = wg_desc_noswizzle(tile, kWgLead, kWgStride);
    for (int b = b0, i = 0; b < b1; ++b, ++i) {
        // (the barrier in next_stage also means that the previous block's MMAs are complete in every warp)
        dequant_page(item.next_stage(p, b, i, tid), kBlock, tile, tid, WgTile{});
        fence_proxy_async_smem();
        __syncthreads();
#pragma unroll 1
        for (int mt = 0; mt < npass; ++mt) {
            std::uint32_t a[8][4];
            a_perm_from_raw(qx, a);
            // the next pass's rows (after the last pass: the next block's first)
            pass_rows(mt + 1 < npass ? mt + 1 : 0, qx);
            float acc[16][4];  // not initialised: the first wgmma overwrites it (scale-d = 0)
            wgmma_m64n128k128_f16(acc, a, desc0, kWgStepBytes);
            store_pass_maxima(p, acc, 64 * mt + 16 * warp, nrows, row0, b, lane);
        }
    }
    cp_async_wait<0>();
}

// The indexer with the query tile in shared memory (default; MsaIdxKernel::smem_q): both wgmma operands
// come from shared memory. The CTA converts its up to 256 E4M3 query rows to FP16 once per item (64 KB, core
// matrices like WgTile's: (row octet o, chunk j) at j * 4096 + o * 128), instead of loading and converting each pass's
// rows for every block (which was 21% of the register-A kernel's instructions and all of its L2 reads). Without A
// fragments the registers hold two accumulator sets, so the next pass's MMAs run while this pass's row maxima are
// taken. Each block's raw record is loaded into registers one block ahead and dequantised (values * 2^-7, one
// multiply: dequant_words) into the single B tile; the maxima are scaled back by 2^7 (exact). 96 KB of shared memory:
// 2 CTAs per SM.
constexpr std::size_t kIdxQTileBytes = std::size_t{kIdxWgRows} * kHeadDim * 2;
constexpr std::size_t kIdxSsSmem = kIdxQTileBytes + kTileBytes;
constexpr unsigned kQTileLead = 4096;  // bytes between the two core matrices of a k16 step (along K)
// Query rows [row0, row0 + nrows) (E4M3) -> the FP16 query tile, permuted dim order; rows >= nrows are zero. Task
// (row, g) writes chunks 4g..4g+3 of a row, i.e. dims 32p + 8g + 0..7 of the four 32-dim pieces p.
__device__ __forceinline__ void load_query_tile(const std::uint8_t* iq, int row0, int nrows, unsigned char* qt,
                                                int tid) {
    constexpr int kTasks = kIdxWgRows * 4 / 128;
    uint2 x[kTasks][4];  // every load issued before the first conversion (once per item: latency, not bandwidth)
#pragma unroll
    for (int k = 0; k < kTasks; ++k) {
        const int u = tid + 128 * k, row = u >> 2, g = u & 3;
#pragma unroll
        for (int q = 0; q < 4; ++q)
            x[k][q] = row < nrows ? *reinterpret_cast<const uint2*>(
                                        iq + static_cast<std::size_t>(row0 + row) * kHeadDim + 32 * q + 8 * g)
                                  : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int k = 0; k < kTasks; ++k) {
        const int u = tid + 128 * k, row = u >> 2, g = u & 3;
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // chunk 4g + i, word q: dims (32q + 8g + i, + 4)
            const std::uint32_t sel = i | ((4 + i) << 4);
            std::uint32_t w[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) w[q] = e4m3x2_to_h2(prmt(x[k][q].x, x[k][q].y, sel));
            *reinterpret_cast<uint4*>(qt + (4 * g + i) * kQTileLead + (row >> 3) * 128 + (row & 7) * 16) =
                make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}
// The Q8KV4 indexer (MsaPrefillOptions::idx_q8kv4; msa.md section 5: E4M3 index queries against index keys rounded
// once to E4M3, as MiniMax's kernels do): pf_index_ss_kernel on FP8 wgmma (m64n128k32, both operands
// from shared memory). Against the FP16 kernel: the query tile is the raw E4M3 bytes (32 KB instead of 64), the key
// tile 16 KB instead of 32, four k32 steps per pass instead of eight k16, so the wgmmas read half the shared-memory
// bytes (the FP16 kernel is bound by the shared-memory pipe, docs/cuda-notes.md section 19) at twice the MMA rate.
// Each key piece is dequantised exactly to FP16 (dequant_words) and rounded to E4M3 (h2x2_to_e4m3x4). Tile layout:
// 8-row x 16-byte core matrices, (row octet o, 16-byte chunk j) at j * lead + o * 128; a k32 step is chunks 2ks and
// 2ks + 1. Dim order along K: piece (row, 32-dim chunk ch) fills chunks 2ch and 2ch + 1 with q8_piece_words' order;
// the queries pass through the same FP16 pairs and the same conversion, so both operands agree whatever byte order
// the conversion uses.
constexpr std::size_t kIdxQ8QTileBytes = std::size_t{kIdxWgRows} * kHeadDim;
// Key-tile stages of the Q8KV4 pf_index_tiled_kernel (2: 64 KB, 3 CTAs per SM; 4: 96 KB, 2).
#ifndef MSA_PF_KT_STAGES_Q8
#define MSA_PF_KT_STAGES_Q8 2
#endif
constexpr std::size_t kIdxQ8Smem = kIdxQ8QTileBytes + std::size_t{kBlock} * kHeadDim;
constexpr unsigned kQ8QLead = 4096, kQ8KLead = 2048;  // bytes between core matrices along K: query, key tile
// The 16 FP16 pair words of a 32-dim piece (o[4m + i] = dims (8m + i, 8m + i + 4), dequant_words' order) -> its 8
// E4M3 words: word 2m + k holds pairs 4m + 2k and 4m + 2k + 1.
__device__ __forceinline__ void q8_piece_words(const std::uint32_t (&o)[16], std::uint32_t (&w)[8]) {
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int k = 0; k < 2; ++k) w[2 * m + k] = h2x2_to_e4m3x4(o[4 * m + 2 * k], o[4 * m + 2 * k + 1]);
}
// A piece's 8 words -> chunks 2ch and 2ch + 1 of `row` (16-byte stores).
__device__ __forceinline__ void q8_store_piece(unsigned char* tile, unsigned lead, int row, int ch,
                                               const std::uint32_t (&w)[8]) {
    unsigned char* base = tile + (row >> 3) * 128 + (row & 7) * 16;
    *reinterpret_cast<uint4*>(base + 2 * ch * lead) = make_uint4(w[0], w[1], w[2], w[3]);
    *reinterpret_cast<uint4*>(base + (2 * ch + 1) * lead) = make_uint4(w[4], w[5], w[6], w[7]);
}
// Query rows [row0, row0 + nrows) (E4M3) -> the FP8 query tile; rows >= nrows are zero. 8 pieces per thread.
__device__ __forceinline__ void load_query_tile_q8(const std::uint8_t* iq, int row0, int nrows, unsigned char* qt,
                                                   int tid) {
    constexpr int kTasks = kIdxWgRows * 4 / 128;
    uint4 x[kTasks][2];  // every load issued before the first conversion
#pragma unroll
    for (int k = 0; k < kTasks; ++k) {
        const int u = tid + 128 * k, row = u >> 2, ch = u & 3;
        const std::uint8_t* src = iq + static_cast<std::size_t>(row0 + row) * kHeadDim + 32 * ch;
#pragma unroll
        for (int v = 0; v < 2; ++v)
            x[k][v] = row < nrows ? *reinterpret_cast<const uint4*>(src + 16 * v) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int k = 0; k < kTasks; ++k) {
        const int u = tid + 128 * k, row = u >> 2, ch = u & 3;
        const std::uint32_t b[8] = {x[k][0].x, x[k][0].y, x[k][0].z, x[k][0].w,
                                    x[k][1].x, x[k][1].y, x[k][1].z, x[k][1].w};  // word v: dims 4v .. 4v + 3
        std::uint32_t o[16], w[8];
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int i = 0; i < 4; ++i) o[4 * m + i] = e4m3x2_to_h2(prmt(b[2 * m], b[2 * m + 1], i | ((4 + i) << 4)));
        q8_piece_words(o, w);
        q8_store_piece(qt, kQ8QLead, row, ch, w);
    }
}
// A key record's pieces (row split) -> the FP8 key tile.
__device__ __forceinline__ void dequant_pieces_q8(const RawPieces& raw, unsigned char* tile, int tid) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        std::uint32_t o[16], w[8];
        dequant_words<false>(raw.v[k], raw.sc[k], o);
        q8_piece_words(o, w);
        q8_store_piece(tile, kQ8KLead, RawPieces::row_of(tid, k, Split::rows), tid & 3, w);
    }
}
// The two numerics of the shared-memory indexer: the query tile, the key tile's dequantisation, the MMA steps.
struct IdxExact {  // exactly dequantised keys (times 2^-7, scaled back in the maxima), FP16 queries, k16 steps
    static constexpr std::size_t kSmem = kIdxSsSmem, kQTileBytes = kIdxQTileBytes, kKeyTileBytes = kTileBytes;
    static constexpr int kTileStages = 3;  // pf_index_tiled_kernel: 160 KB, 1 CTA per SM
    static constexpr float kScoreScale = 128.f;
    __device__ static void load_queries(const std::uint8_t* iq, int row0, int nrows, unsigned char* qt, int tid) {
        load_query_tile(iq, row0, nrows, qt, tid);
    }
    __device__ static void dequant(const RawPieces& raw, unsigned char* tile, int tid) {
        dequant_pieces<true>(raw, tile, tid, WgTile{});
    }
    __device__ static std::uint64_t desc_q(const unsigned char* qt) { return wg_desc_noswizzle(qt, kQTileLead, 128); }
    __device__ static std::uint64_t desc_k(const unsigned char* t) { return wg_desc_noswizzle(t, kWgLead, kWgStride); }
    static constexpr int kSteps = 8;  // k16
    __device__ static void mma_step(float (&acc)[16][4], std::uint64_t dq, std::uint64_t dk, int mt, int ks) {
        wgmma_m64n128k16_f16_ss(acc, dq + ((mt * 1024 + ks * 2 * kQTileLead) >> 4), dk + ks * (kWgStepBytes >> 4),
                                ks > 0);
    }
};
struct IdxQ8kv4 {  // keys rounded once to E4M3, raw E4M3 queries, FP8 k32 steps
    static constexpr std::size_t kSmem = kIdxQ8Smem, kQTileBytes = kIdxQ8QTileBytes,
                                 kKeyTileBytes = std::size_t{kBlock} * kHeadDim;
    static constexpr int kTileStages = MSA_PF_KT_STAGES_Q8;  // pf_index_tiled_kernel
    static constexpr float kScoreScale = 1.f;
    __device__ static void load_queries(const std::uint8_t* iq, int row0, int nrows, unsigned char* qt, int tid) {
        load_query_tile_q8(iq, row0, nrows, qt, tid);
    }
    __device__ static void dequant(const RawPieces& raw, unsigned char* tile, int tid) {
        dequant_pieces_q8(raw, tile, tid);
    }
    __device__ static std::uint64_t desc_q(const unsigned char* qt) { return wg_desc_noswizzle(qt, kQ8QLead, 128); }
    __device__ static std::uint64_t desc_k(const unsigned char* t) { return wg_desc_noswizzle(t, kQ8KLead, 128); }
    static constexpr int kSteps = 4;  // k32
    __device__ static void mma_step(float (&acc)[16][4], std::uint64_t dq, std::uint64_t dk, int mt, int ks) {
        wgmma_m64n128k32_e4m3_ss(acc, dq + ((mt * 1024 + ks * 2 * kQ8QLead) >> 4), dk + ((ks * 2 * kQ8KLead) >> 4),
                                 ks > 0);
    }
};
// Pass mt (query rows 64 mt .. + 63) against the B tile: Fmt's MMA steps over K = 128, committed as one group, not
// waited for.
template <class Fmt>
__device__ __forceinline__ void issue_index_pass(float (&acc)[16][4], std::uint64_t desc_q, std::uint64_t desc_k,
                                                 int mt) {
    wgmma_fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Fmt::kSteps; ++ks) Fmt::mma_step(acc, desc_q, desc_k, mt, ks);
    wgmma_commit();
    wgmma_fence_regs(acc);
}
// One block's four M = 64 passes against the B tile (desc_k), two in flight: the next pass's MMAs run while this
// pass's row maxima are taken. after_mmas() runs once every MMA of the block is complete in this warp (before the
// last pass's maxima).
template <class Fmt, class AfterMmas>
__device__ __forceinline__ void index_block_passes(const PfIdx& p, std::uint64_t desc_q, std::uint64_t desc_k, int warp,
                                                   int lane, int row0, int nrows, int b, AfterMmas&& after_mmas) {
    const int wrow = 16 * warp;
    constexpr float sc = Fmt::kScoreScale;
    float acc0[16][4], acc1[16][4];  // not initialised: each pass's first wgmma overwrites them (scale-d = 0)
    issue_index_pass<Fmt>(acc0, desc_q, desc_k, 0);
    issue_index_pass<Fmt>(acc1, desc_q, desc_k, 1);
    wgmma_wait1();
    wgmma_fence_regs(acc0);
    store_pass_maxima(p, acc0, wrow, nrows, row0, b, lane, sc);
    issue_index_pass<Fmt>(acc0, desc_q, desc_k, 2);
    wgmma_wait1();
    wgmma_fence_regs(acc1);
    store_pass_maxima(p, acc1, 64 + wrow, nrows, row0, b, lane, sc);
    issue_index_pass<Fmt>(acc1, desc_q, desc_k, 3);
    wgmma_wait1();
    wgmma_fence_regs(acc0);
    store_pass_maxima(p, acc0, 128 + wrow, nrows, row0, b, lane, sc);
    wgmma_wait0();
    wgmma_fence_regs(acc1);
    after_mmas();
    store_pass_maxima(p, acc1, 192 + wrow, nrows, row0, b, lane, sc);
}
// The indexer with the query tile in shared memory (default; MsaIdxKernel::smem_q), in either numerics (Fmt): both
// wgmma operands come from shared memory; each block's raw record is loaded into registers one block ahead and
// dequantised into the single B tile; four M = 64 passes per block, two in flight (the next pass's MMAs run while
// this pass's row maxima are taken). 2 CTAs per SM (IdxExact: 96 KB of shared memory; IdxQ8kv4: 255 registers; one
// accumulator set at 3-4 CTAs per SM measured the same, session 19).
template <class Fmt>
__global__ void __launch_bounds__(128, 2) pf_index_ss_kernel(const PfIdx p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    unsigned char* qt = smem;
    unsigned char* tile = smem + Fmt::kQTileBytes;
    const IdxItemHeader item(p);
    const int row0 = item.row0, nrows = item.nrows, b0 = item.b0, b1 = item.b1;
    // the item's (at most 32) page ids, lane i holding block b0 + i's: no page-table load in the block loop
    const int lane_page = b0 + lane < b1 ? item.pt[b0 + lane] : 0;
    auto record = [&](int b) {
        return p.ik_cache + static_cast<std::size_t>(__shfl_sync(0xffffffffu, lane_page, b - b0)) * kPageHeadBytes;
    };
    RawPieces raw;
    raw.load(record(b0), kBlock, tid, Split::rows);
    Fmt::load_queries(p.iq, row0, nrows, qt, tid);
    const std::uint64_t desc_q = Fmt::desc_q(qt), desc_k = Fmt::desc_k(tile);
    for (int b = b0; b < b1; ++b) {
        if (b > b0) __syncthreads();  // every warp has waited for its MMAs on the previous block's tile
        Fmt::dequant(raw, tile, tid);
        if (b + 1 < b1) raw.load(record(b + 1), kBlock, tid, Split::rows);
        fence_proxy_async_smem();
        __syncthreads();
        index_block_passes<Fmt>(p, desc_q, desc_k, warp, lane, row0, nrows, b, [] {});
    }
}

// Per-token and per-block metadata of the plan (MsaPrefillPlan::tok_seq etc., in the workspace).
struct PfMeta {
    const int* tok_seq;
    const int* tok_pos;
    const int* blk_seq;
    const int* blk_b;
    const int* seq_kv;
    const int* seq_base;
};
// The indexer on converted key tiles (MsaPrefillOptions::idx_key_tiles). The kernel above dequantises every block
// once per item, so at 8K tokens on a 120K prefix each index-key block is converted again by each of the 128 query
// tiles' CTAs. Here pf_key_tiles_kernel converts each block once per call into Fmt's shared-memory tile bytes in the
// workspace (16 KB in Q8KV4, 32 KB exact; the 128K chunk's 1,024 blocks: 16 or 32 MB, which stay in L2), and the
// indexer streams them with bulk copies (TMA) through kTileStages stages, each guarded by a "full" mbarrier (the
// copy's bytes) and an "empty" one (the 4 warps' MMAs on it are done; thread 0 then refills it). The passes of a block
// run as in pf_index_ss_kernel (two in flight). Chaining them across blocks (the next block's first passes issued
// before this block's last maxima) makes ptxas serialise the wgmmas (warning C7514: accumulators in flight across
// the loop), so each block ends with wgmma_wait0. Same MMAs on the same bytes: the same scores bit for bit.
// Session 21 (Q8KV4, FP8 scores): the indexer at 8K on a 32K prefix 327 us, 128K in one chunk 39.8 -> 37.1-38.2 ms.
struct PfKeyTiles {
    const std::uint8_t* ik_cache;
    const int* page_table;
    PfMeta m;
    unsigned char* key_tiles;
    int max_blocks;
};
template <class Fmt>
__global__ void __launch_bounds__(128) pf_key_tiles_kernel(const PfKeyTiles p) {
    const int g = blockIdx.x, s = p.m.blk_seq[g], b = p.m.blk_b[g];
    if (b >= (p.m.seq_kv[s] - 1) / kBlock) return;  // a sequence's last block is never scored
    RawPieces raw;
    raw.load(p.ik_cache + static_cast<std::size_t>(p.page_table[static_cast<std::size_t>(s) * p.max_blocks + b]) *
                              kPageHeadBytes,
             kBlock, threadIdx.x, Split::rows);
    Fmt::dequant(raw, p.key_tiles + static_cast<std::size_t>(g) * Fmt::kKeyTileBytes, threadIdx.x);
}
template <class Fmt>
constexpr std::size_t kIdxTiledSmem =
    Fmt::kQTileBytes + (Fmt::kKeyTileBytes + 16) * Fmt::kTileStages;  // stages, then a full and an empty mbarrier each
template <class Fmt>
__global__ void __launch_bounds__(128, 2) pf_index_tiled_kernel(const PfIdx p) {
    constexpr int S = Fmt::kTileStages;
    constexpr unsigned kBytes = Fmt::kKeyTileBytes;
    static_assert(S >= 2, "the next block's stage is waited for before this block's stage is released");
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    unsigned char* qt = smem;
    unsigned char* stages = smem + Fmt::kQTileBytes;
    auto* full = reinterpret_cast<unsigned long long*>(stages + S * kBytes);
    unsigned long long* empty = full + S;
    const IdxItemHeader item(p);
    const int row0 = item.row0, nrows = item.nrows, b0 = item.b0, nb = item.b1 - item.b0;
    const unsigned char* src = p.key_tiles + (static_cast<std::size_t>(p.seq_blk_base[item.seq]) + b0) * kBytes;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init_cta(&full[s], 1);
            mbar_init_cta(&empty[s], 4);
        }
        fence_mbar_init_cluster();
        fence_proxy_async_smem();  // ... and to the TMA unit
        for (int s = 0; s < S && s < nb; ++s)
            bulk_copy_to_smem(stages + s * kBytes, src + s * kBytes, kBytes, &full[s]);
    }
    Fmt::load_queries(p.iq, row0, nrows, qt, tid);
    fence_proxy_async_smem();
    __syncthreads();
    const std::uint64_t desc_q = Fmt::desc_q(qt);
    auto desc_k = [&](int s) { return Fmt::desc_k(stages + s * kBytes); };
    for (int i = 0; i < nb; ++i) {
        const int s = i % S, b = b0 + i;
        mbar_wait(&full[s], (i / S) & 1);
        index_block_passes<Fmt>(p, desc_q, desc_k(s), warp, lane, row0, nrows, b, [&] {
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);  // this warp's MMAs on stage s are complete
            if (tid == 0 && i + S < nb) {           // refill stage s with block i + S once every warp released it
                mbar_wait(&empty[s], (i / S) & 1);
                bulk_copy_to_smem(stages + s * kBytes, src + (i + S) * kBytes, kBytes, &full[s]);
            }
        });
    }
}

// ---------------------------------------------------------------- 2. keyed top-k
struct PfTopk {
    const float* scores;
    PfMeta m;
    int* topk_out;
    unsigned* counts;
    int max_blocks, nkv, topk, total_blocks, t0, rows;
};

// One value per lane, sorted descending across the warp (bitonic: 15 exchange steps).
__device__ __forceinline__ std::uint32_t warp_sort_desc(std::uint32_t v, int lane) {
#pragma unroll
    for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            const std::uint32_t o = __shfl_xor_sync(0xffffffffu, v, stride);
            const bool desc = (lane & size) == 0, lower = (lane & stride) == 0;
            v = desc == lower ? max(v, o) : min(v, o);
        }
    return v;
}
// The keyed top-(k-1) of n <= 1024 scores (v0, v1: 16 per lane as load_score_vectors gives them, blocks lane + 32 j
// and 512 + lane + 32 j) by a threshold: the (k-1)-th largest of the 32 lanes' largest keys is a key K that at least
// k - 1 keys reach, so no key below K can be picked. When at most 32 keys reach it (the usual case: keys are
// distinct), they are gathered through `surv` (32 words of shared memory for this warp) and sorted across the warp;
// otherwise (many near-equal scores) the lanes' sorted top-15 lists are merged as for longer rows. Lane j < k - 1
// returns the block of the j-th largest key, other lanes -1: the same picks either way.
__device__ int keyed_topk_short(const float (&v0)[16], const float (&v1)[16], int n, int k, int lane,
                                const KeyedQuant& kq, std::uint32_t* surv) {
    std::uint32_t x[32];  // 0 past n: below every real key (whose low half ~block is never 0 for block < 8192)
    std::uint32_t mx = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const int blk = (j < 16 ? 0 : 512) + lane + 32 * (j & 15);
        x[j] = blk < n ? keyed_key(j < 16 ? v0[j] : v1[j - 16], kq, blk) : 0u;
        mx = max(mx, x[j]);
    }
    const std::uint32_t kth = __shfl_sync(0xffffffffu, warp_sort_desc(mx, lane), (k + 30) & 31);  // (k-1)-th
    int c = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j) c += x[j] != 0u && x[j] >= kth;
    int incl = c;  // inclusive prefix over the lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
    }
    if (k >= 2 && __shfl_sync(0xffffffffu, incl, 31) <= 32) {
        surv[lane] = 0u;
        __syncwarp();
        int at = incl - c;
#pragma unroll
        for (int j = 0; j < 32; ++j)
            if (x[j] != 0u && x[j] >= kth) surv[at++] = x[j];
        __syncwarp();
        const std::uint32_t sorted = warp_sort_desc(surv[lane], lane);
        __syncwarp();  // surv is free again
        return lane < k - 1 && sorted != 0u ? static_cast<int>(~sorted & 0xFFFFu) : -1;
    }
    std::uint32_t top[15], y[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) y[j] = x[j];
    sort16_desc(y);
#pragma unroll
    for (int j = 0; j < 15; ++j) top[j] = y[j];
#pragma unroll
    for (int j = 0; j < 16; ++j) y[j] = x[16 + j];
    sort16_desc(y);
    top15_merge(top, y);
    return top15_pick(top, k, lane, -1);
}

// Keyed top-(k-1) of history scores sc[0..n) by one warp (msa.md section 3): lane j < k-1 returns the j-th pick.
// As the decode's topk_pick: the scores are read 512 at a time with every load issued before any is used, the first
// 1024 stay in registers for the second pass, and each lane's keys of a 512-score chunk are sorted (16 at once) and
// merged into its top-15 list instead of being inserted one by one (a 15-step dependent chain per score). Rows of at
// most 1024 blocks (128K tokens) go to keyed_topk_short (session 20: 95 -> 70 us per 8K tokens on a 120K prefix).
__device__ int keyed_topk_warp(const float* sc, int n, int k, int lane, std::uint32_t* surv) {
    float v0[16], v1[16];
    load_score_vectors<float>(sc, 0, n, lane, v0);
    if (n > 512) load_score_vectors<float>(sc, 512, n, lane, v1);
    float mn = CUDART_INF_F, mx = -CUDART_INF_F;
    // fn(16 scores per lane, first block) over all chunks: the two in registers, then the rest from memory
    auto each_chunk = [&](auto&& fn) {
        fn(v0, 0);
        if (n > 512) fn(v1, 512);
        for (int base = 1024; base < n; base += 512) {
            float v[16];
            load_score_vectors<float>(sc, base, n, lane, v);
            fn(v, base);
        }
    };
    each_chunk([&](const float (&v)[16], int base) { chunk_min_max(v, base, n, lane, mn, mx); });
    const KeyedQuant kq = keyed_quant(warp_min(mn), warp_max(mx));
    if (n <= 1024) return keyed_topk_short(v0, v1, n, k, lane, kq, surv);
    std::uint32_t top[15];
#pragma unroll
    for (int j = 0; j < 15; ++j) top[j] = 0;
    each_chunk([&](const float (&v)[16], int base) { merge_keyed_chunk(top, v, base, n, lane, kq); });
    return top15_pick(top, k, lane, -1);
}

__global__ void __launch_bounds__(128) pf_topk_kernel(const PfTopk p) {
    __shared__ std::uint32_t s_surv[4][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wr = blockIdx.x * 4 + warp;
    if (wr >= p.rows) return;
    const int t = p.t0 + wr / p.nkv, g = wr % p.nkv;
    const int pos = p.m.tok_pos[t], seq = p.m.tok_seq[t], local = pos / kBlock;
    int blk;
    if (local + 1 <= p.topk) {
        blk = lane <= local ? lane : -1;
    } else {
        blk = keyed_topk_warp(p.scores + static_cast<std::size_t>(wr) * p.max_blocks, local, p.topk, lane,
                              s_surv[warp]);
        if (lane == p.topk - 1) blk = local;
    }
    if (lane < p.topk) {
        p.topk_out[(static_cast<std::size_t>(t) * p.nkv + g) * p.topk + lane] = blk;
        if (blk >= 0) atomicAdd(&p.counts[g * p.total_blocks + p.m.seq_base[seq] + blk], 1u);
    }
}

// ---------------------------------------------------------------- 3. scan
// One attention work chunk (an int4): entries [begin, end) of its list, the (page, KV head) record index, and
// bgv = block | KV head << 13 | valid rows << 20 (block < 8192, head < 128, valid 1..128).
__device__ __forceinline__ int chunk_block(int bgv) {
    return bgv & 0x1FFF;
}
__device__ __forceinline__ int chunk_head(int bgv) {
    return (bgv >> 13) & 0x7F;
}
__device__ __forceinline__ int chunk_valid(int bgv) {
    return bgv >> 20;
}
struct PfScan {
    unsigned* counts;
    int* cursor;
    int* num_chunks;
    int4* chunks;
    PfMeta m;
    const int* page_table;
    int n, total_blocks, max_blocks;
};
__global__ void __launch_bounds__(kScanThreads) pf_scan_kernel(const PfScan p) {
    using Scan = cub::BlockScan<int, kScanThreads>;
    __shared__ typename Scan::TempStorage tmp;
    const int tid = threadIdx.x;
    const int per = (p.n + kScanThreads - 1) / kScanThreads;
    const int i0 = min(p.n, tid * per), i1 = min(p.n, i0 + per);
    int sum = 0, chunks = 0;
    for (int i = i0; i < i1; ++i) {
        const int cnt = static_cast<int>(p.counts[i]);
        sum += cnt;
        chunks += (cnt + kQc - 1) / kQc;
    }
    int off = 0, coff = 0;
    Scan(tmp).ExclusiveSum(sum, off);
    __syncthreads();
    Scan(tmp).ExclusiveSum(chunks, coff);
    for (int i = i0; i < i1; ++i) {
        const int cnt = static_cast<int>(p.counts[i]);
        p.counts[i] = 0;
        p.cursor[i] = off;
        const int nch = (cnt + kQc - 1) / kQc;
        if (nch > 0) {
            // the chunk's record and block, resolved once here so that an attention CTA needs one load per chunk
            const int g = i / p.total_blocks, gb = i - g * p.total_blocks;
            const int seq = p.m.blk_seq[gb], b = p.m.blk_b[gb];
            const int page = p.page_table[static_cast<std::size_t>(seq) * p.max_blocks + b];
            const int valid = min(kBlock, p.m.seq_kv[seq] - b * kBlock);
            const int nkv = p.n / p.total_blocks;
            for (int j = 0; j < nch; ++j)
                p.chunks[coff + j] = make_int4(off + j * kQc, min(off + (j + 1) * kQc, off + cnt), page * nkv + g,
                                               b | (g << 13) | (valid << 20));
        }
        off += cnt;
        coff += nch;
    }
    if (tid == kScanThreads - 1) {
        p.num_chunks[0] = coff;
        p.num_chunks[1] = 0;  // the wgmma attention's chunk counter (pf_attn_wg_kernel)
    }
}

// ---------------------------------------------------------------- 4. fill
struct PfFill {
    const int* topk_out;
    PfMeta m;
    int* cursor;
    int* entries;
    int nkv, topk, total_blocks, t0, n;
};
__global__ void pf_fill_kernel(const PfFill p) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= p.n) return;
    const int blk = p.topk_out[static_cast<std::size_t>(p.t0) * p.nkv * p.topk + e];
    if (blk < 0) return;
    const int tl = e / (p.nkv * p.topk), g = (e / p.topk) % p.nkv, slot = e % p.topk;
    const int L = g * p.total_blocks + p.m.seq_base[p.m.tok_seq[p.t0 + tl]] + blk;
    const int i = atomicAdd(&p.cursor[L], 1);
    p.entries[i] = (tl << 4) | slot;
}

// ---------------------------------------------------------------- 5. gathered sparse attention
struct PfAttn {
    const std::uint8_t* q;
    const std::uint8_t* k_cache;
    const std::uint8_t* v_cache;
    PfMeta m;
    int* num_chunks;  // [0] the window's chunks, [1] the wgmma attention's chunk counter
    const int4* chunks;
    const int* entries;
    __half* part_o;
    float* part_lse;
    int nq, nkv, G, topk, t0;
};
constexpr std::size_t kAttnSmem = 2 * kTileBytes;
constexpr std::size_t kAttnSmemQ8s = 2 * kQ8sTileBytes;  // E4M3 K and V^T tiles (FP8 scores)
constexpr std::size_t attn_smem(const MsaPrefillOptions& o) {  // of attn_kernel_for(o)
    return o.wgmma && o.attn_q8kv4 && o.attn_fp8_scores ? kAttnSmemQ8s : kAttnSmem;
}
// Entry ie of a chunk (entries below end): its code (token << 4 | slot) and its token's position; code and pos stay
// untouched past end.
__device__ __forceinline__ void chunk_entry(const PfAttn& p, int ie, int end, int& code, int& pos) {
    if (ie < end) {
        code = p.entries[ie];
        pos = p.m.tok_pos[p.t0 + (code >> 4)];
    }
}

// One gathered query (token t, KV head g) against the chunk's K tile: S = Q K^T with the group's 16 query heads as
// the MMA rows, causal mask (keys > lim hidden), softmax over the block in FP32; the unnormalised probabilities
// come back as FP16 A fragments for P V, with the base-2 LSE and 1 / sum of rows r and r + 8.
struct QueryProbs {
    std::uint32_t pa[8][4];
    float lse[2], inv[2];
};
// Causal mask (keys > lim hidden) and softmax numerators over the block in FP32, in place: s becomes
// 2^((s - max) * log2(e) / sqrt(128) + bias) for rows r and r + 8 of an m16 tile (s in the mma.sync m16n8 order, which
// is also wgmma's accumulator order per warp); m: the rows' max logits times log2(e) / sqrt(128), l: the rows' sums.
__device__ __forceinline__ void block_exp(float (&s)[16][4], int lim, int c, float bias, float (&m)[2], float (&l)[2]) {
    if (lim < kBlock - 1) {
#pragma unroll
        for (int nt = 0; nt < 16; ++nt)
#pragma unroll
            for (int e2 = 0; e2 < 4; ++e2)
                if (nt * 8 + 2 * c + (e2 & 1) > lim) s[nt][e2] = -CUDART_INF_F;
    }
    float m0 = -CUDART_INF_F, m1 = -CUDART_INF_F;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
        m0 = fmaxf(m0, fmaxf(s[nt][0], s[nt][1]));
        m1 = fmaxf(m1, fmaxf(s[nt][2], s[nt][3]));
    }
    m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, 1));
    m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, 2));
    m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, 1));
    m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, 2));
    const float n0 = bias - m0 * kLog2eOverSqrtD, n1 = bias - m1 * kLog2eOverSqrtD;  // key 0 is visible: m finite
    float l0 = 0.f, l1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
        s[nt][0] = fast_exp2(fmaf(s[nt][0], kLog2eOverSqrtD, n0));
        s[nt][1] = fast_exp2(fmaf(s[nt][1], kLog2eOverSqrtD, n0));
        s[nt][2] = fast_exp2(fmaf(s[nt][2], kLog2eOverSqrtD, n1));
        s[nt][3] = fast_exp2(fmaf(s[nt][3], kLog2eOverSqrtD, n1));
        l0 += s[nt][0] + s[nt][1];
        l1 += s[nt][2] + s[nt][3];
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    m[0] = m0 * kLog2eOverSqrtD;
    m[1] = m1 * kLog2eOverSqrtD;
    l[0] = l0;
    l[1] = l1;
}
// block_exp and the FP16 A fragments of P for P V, the base-2 LSE and 1 / sum of rows r and r + 8.
__device__ __forceinline__ void block_probs(float (&s)[16][4], int lim, int c, QueryProbs& out) {
    float m[2], l[2];
    block_exp(s, lim, c, 0.f, m, l);
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
        out.pa[ks][0] = pack_h2(s[2 * ks][0], s[2 * ks][1]);
        out.pa[ks][1] = pack_h2(s[2 * ks][2], s[2 * ks][3]);
        out.pa[ks][2] = pack_h2(s[2 * ks + 1][0], s[2 * ks + 1][1]);
        out.pa[ks][3] = pack_h2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        out.lse[h] = m[h] + log2f(l[h]);
        out.inv[h] = 1.f / l[h];
    }
}
// The Q8KV4 contract (msa.md section 5): P V takes E4M3(P * 448) and is scaled by 1 / 448, the sum is FP32's. Here
// the exponent carries log2(448), so s holds 448 P: its E4M3 roundings are the A fragments (k32 step ks: keys in the
// byte order of dequant_vt_q8), l = 448 * sum, and O = (E4M3(448 P) V) / l.
struct QueryProbsQ8 {
    std::uint32_t pa[4][4];
    float lse[2], inv[2];
};
constexpr float kLog2Of448 = 8.807354922057604f;
__device__ __forceinline__ void q8_probs(float (&s)[16][4], int lim, int c, QueryProbsQ8& out) {
    float m[2], l[2];
    block_exp(s, lim, c, kLog2Of448, m, l);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // keys 32 ks + 16 h + 4 c + .. : n8 tiles 4 ks + 2 h and + 1; rows r, r + 8
            const float(&a)[4] = s[4 * ks + 2 * h];
            const float(&b)[4] = s[4 * ks + 2 * h + 1];
            out.pa[ks][2 * h] = f32x4_to_e4m3x4(a[0], a[1], b[0], b[1]);
            out.pa[ks][2 * h + 1] = f32x4_to_e4m3x4(a[2], a[3], b[2], b[3]);
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        out.lse[h] = m[h] + log2f(l[h]) - kLog2Of448;
        out.inv[h] = 1.f / l[h];
    }
}

__device__ __forceinline__ void query_probs(const PfAttn& p, const unsigned char* kt, int t, int g, int lim, int lane,
                                            QueryProbs& out) {
    const int r = (lane & 31) >> 2, c = lane & 3;
    const int kkey = ((lane >> 4) << 3) + (lane & 7), kchunk = (lane >> 3) & 1;  // K: as in the indexer
    std::uint32_t qa[8][4];
    {
        const std::uint8_t* qb = p.q + (static_cast<std::size_t>(t) * p.nq + g * p.G) * kHeadDim;
        load_a_perm(r < p.G ? qb + r * kHeadDim : nullptr, r + 8 < p.G ? qb + (r + 8) * kHeadDim : nullptr, c, qa);
    }
    float s[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
        for (int np = 0; np < 8; ++np) {
            std::uint32_t bf[4];
            ldsm_x4(bf, kt + tile_off(np * 16 + kkey, 2 * ks + kchunk));
            mma16816(s[2 * np], qa[ks], bf[0], bf[1]);
            mma16816(s[2 * np + 1], qa[ks], bf[2], bf[3]);
        }
    block_probs(s, lim, c, out);
}

// QPW gathered queries per warp at a time: their P V products share every V fragment (QPW = 2 halves the V
// ldmatrix traffic per query). O is computed in two halves of the (permuted) dims to bound the registers.
template <int QPW>
__global__ void __launch_bounds__(128, 3) pf_attn_kernel(const PfAttn p) {
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* kt = smem;
    unsigned char* vt = smem + kTileBytes;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const int total = *p.num_chunks;
    const int vkey = (((lane >> 3) & 1) << 3) + (lane & 7), vchunk = lane >> 4;  // V (transposed loads)
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const int4 cd = p.chunks[w];
        const int begin = cd.x, end = cd.y, g = chunk_head(cd.w), b = chunk_block(cd.w), valid = chunk_valid(cd.w);
        const std::size_t rec = static_cast<std::size_t>(cd.z) * kPageHeadBytes;
        __syncthreads();  // the previous chunk's tiles are no longer read
        {  // both records' loads before either decoding
            RawPieces rk, rv;
            rk.load(p.k_cache + rec, valid, tid, Split::rows);
            rv.load(p.v_cache + rec, valid, tid, Split::rows);
            dequant_pieces(rk, kt, tid, SwizzledTile{});
            dequant_pieces(rv, vt, tid, SwizzledTile{});
        }
        // This warp's <= kQc / 4 entries of the chunk (iteration k, query q: lane k * QPW + q) and their positions,
        // loaded once: a query no longer starts with two dependent global round trips (entry, then position and Q).
        int my_code = 0, my_pos = 0;
        if (lane < kQc / 4)
            chunk_entry(p, begin + QPW * warp + 4 * QPW * (lane / QPW) + lane % QPW, end, my_code, my_pos);
        __syncthreads();
        for (int e = begin + QPW * warp, k = 0; e < end; e += 4 * QPW, ++k) {
            const int nqw = min(QPW, end - e);  // warp-uniform: < QPW only at the chunk's tail
            // Next iteration's query rows (the group's G heads of one token: G * 128 contiguous bytes) into L2 while
            // this one computes (its Q load was a DRAM round trip).
#pragma unroll
            for (int q = 0; q < QPW; ++q) {
                const int ncode = __shfl_sync(0xffffffffu, my_code, ((k + 1) * QPW + q) & 31);
                if (lane == 0 && e + 4 * QPW + q < end)
                    prefetch_l2_bulk(p.q + (static_cast<std::size_t>(p.t0 + (ncode >> 4)) * p.nq + g * p.G) * kHeadDim,
                                     static_cast<unsigned>(p.G) * kHeadDim);
            }
            QueryProbs qp[QPW];
            std::size_t unit[QPW];
#pragma unroll
            for (int q = 0; q < QPW; ++q) {
                unit[q] = 0;
                const int code = __shfl_sync(0xffffffffu, my_code, k * QPW + q);
                const int pos = __shfl_sync(0xffffffffu, my_pos, k * QPW + q);
                if (q < nqw) {
                    const int tl = code >> 4, slot = code & 15, t = p.t0 + tl;
                    // keys <= lim are visible (>= 0: b <= local)
                    query_probs(p, kt, t, g, pos - b * kBlock, lane, qp[q]);
                    unit[q] = (static_cast<std::size_t>(tl) * p.nkv + g) * p.topk + slot;
                } else {
#pragma unroll
                    for (int ks = 0; ks < 8; ++ks)
                        qp[q].pa[ks][0] = qp[q].pa[ks][1] = qp[q].pa[ks][2] = qp[q].pa[ks][3] = 0u;
                }
            }
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float o[QPW][8][4];
#pragma unroll
                for (int q = 0; q < QPW; ++q)
#pragma unroll
                    for (int nd = 0; nd < 8; ++nd) o[q][nd][0] = o[q][nd][1] = o[q][nd][2] = o[q][nd][3] = 0.f;
#pragma unroll
                for (int ks = 0; ks < 8; ++ks)
#pragma unroll
                    for (int np = 0; np < 4; ++np) {
                        std::uint32_t bf[4];
                        ldsm_x4_trans(bf, vt + tile_off(ks * 16 + vkey, 2 * (4 * half + np) + vchunk));
#pragma unroll
                        for (int q = 0; q < QPW; ++q) {
                            mma16816(o[q][2 * np], qp[q].pa[ks], bf[0], bf[1]);
                            mma16816(o[q][2 * np + 1], qp[q].pa[ks], bf[2], bf[3]);
                        }
                    }
                    // o[q][4mm + i][e] (row r; [2 + e]: row r + 8) is dim 32c + 8m + i + 4e with m = 2 half + mm (the
                    // permuted V tile order): 16 contiguous dims per row and half, two 16-byte stores, streaming
                    // (evict-first: the partials are read once, by the combine, and would evict Q and K/V from L2)
#pragma unroll
                for (int q = 0; q < QPW; ++q) {
                    if (q >= nqw) continue;
                    __half* po = p.part_o + unit[q] * 16 * kHeadDim;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        if (r + 8 * h >= p.G) continue;
                        const float inv = qp[q].inv[h];
                        __half* dst = po + (r + 8 * h) * kHeadDim + 32 * c + 16 * half;
#pragma unroll
                        for (int mm = 0; mm < 2; ++mm) {
                            const float(&x0)[4] = o[q][4 * mm];
                            const float(&x1)[4] = o[q][4 * mm + 1];
                            const float(&x2)[4] = o[q][4 * mm + 2];
                            const float(&x3)[4] = o[q][4 * mm + 3];
                            __stcs(reinterpret_cast<uint4*>(dst + 8 * mm),
                                   make_uint4(pack_h2(x0[2 * h] * inv, x1[2 * h] * inv),
                                              pack_h2(x2[2 * h] * inv, x3[2 * h] * inv),
                                              pack_h2(x0[2 * h + 1] * inv, x1[2 * h + 1] * inv),
                                              pack_h2(x2[2 * h + 1] * inv, x3[2 * h + 1] * inv)));
                        }
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < QPW; ++q)
                if (q < nqw && c == 0) {
                    if (r < p.G) p.part_lse[unit[q] * 16 + r] = qp[q].lse[0];
                    if (r + 8 < p.G) p.part_lse[unit[q] * 16 + r + 8] = qp[q].lse[1];
                }
        }
    }
}

// The gathered attention on wgmma (default): the CTA's 4 warps are one warpgroup and serve 4 gathered queries at a
// time, warp w's query (its group's 16 query heads, padded for G < 16) being rows 16w .. 16w + 15 of M = 64. S = Q K^T
// reads K as B from a WgTile (N = 128 keys), O = P V reads V^T (dequant_pieces_vt: N = 128 output dims, K = keys); the
// tensor cores fetch each B operand once per warpgroup instead of each warp copying all fragments with ldmatrix (the
// shared-memory pipe bound the mma.sync version: docs/cuda-notes.md section 9). A warp past the chunk's end feeds
// zero queries (wgmma is warpgroup-wide) and stores nothing. Same numerics as pf_attn_kernel.
//
// kQ8: msa.md section 5's Q8KV4 contract (MsaPrefillOptions::attn_q8kv4): K and V rounded once to E4M3; S = Q K^T
// as above (exact products of E4M3 values, FP32 sums); P V on FP8 wgmma with E4M3(448 P) and the E4M3 V^T tile
// (dequant_vt_q8, 16 KB), scaled by 1 / (448 sum). Per selected block, as MiniMax's prefill kernel computes it.
// kQ8s (with kQ8; MsaPrefillOptions::attn_fp8_scores): S on FP8 wgmma too, from the raw E4M3 query bytes and an E4M3 K
// tile (dequant_k_q8s): the same products, but summed by Hopper's FP8 tensor-core accumulation instead of FP32
// (docs/cuda-notes.md section 25); 32 KB of shared memory.
#ifndef MSA_PF_Q8S_CTAS  // resident FP8-score attention CTAs per SM the register budget is sized for
#define MSA_PF_Q8S_CTAS 4
#endif
template <bool kQ8, bool kQ8s = false>
__global__ void __launch_bounds__(128, kQ8s ? MSA_PF_Q8S_CTAS : 3) pf_attn_wg_kernel(const PfAttn p) {
    static_assert(kQ8 || !kQ8s, "FP8 scores only within the Q8KV4 attention");
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* kt = smem;
    unsigned char* vt = smem + (kQ8s ? kQ8sTileBytes : kTileBytes);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    const int total = p.num_chunks[0];
    const std::uint64_t desc_k =
        kQ8s ? wg_desc_noswizzle(kt, kQ8sLead, 128) : wg_desc_noswizzle(kt, kWgLead, kWgStride);
    const std::uint64_t desc_v = wg_desc_noswizzle(vt, kWgLead, kWgStride);
    // Chunks are taken dynamically: CTA b starts with chunk b, then each claims its next one from the window's counter
    // (num_chunks[1], zeroed by pf_scan_kernel) while it computes the current one, so CTAs that drew short chunks take
    // more and the grid ends together (a fixed stride left a tail of CTAs still working on their last chunks). The
    // claimed chunk's descriptor is loaded one chunk ahead and its K/V records are prefetched into L2 while this
    // chunk computes, so a chunk starts with L2 hits instead of a chain of dependent DRAM round trips.
    __shared__ int s_next;
    __shared__ int4 s_next_cd;
    auto claim = [&] {  // thread 0: the chunk after the one being computed
        const int nw = static_cast<int>(gridDim.x) + atomicAdd(p.num_chunks + 1, 1);
        s_next = nw;
        s_next_cd = nw < total ? p.chunks[nw] : make_int4(0, 0, 0, 0);
    };
    if (tid == 0 && static_cast<int>(blockIdx.x) < total) claim();
    int4 cd_cur = static_cast<int>(blockIdx.x) < total ? p.chunks[blockIdx.x] : make_int4(0, 0, 0, 0);
    for (int w = blockIdx.x; w < total;) {
        const int4 cd = cd_cur;
        // The next chunk's claim (by thread 0, before the previous chunk's queries) is visible after this barrier,
        // and the previous chunk's tiles are no longer read (every warp has waited for its wgmmas).
        __syncthreads();
        const int w_next = s_next;
        const int4 next_cd = s_next_cd;
        const bool has_next = w_next < total;
        const int begin = cd.x, end = cd.y, g = chunk_head(cd.w), b = chunk_block(cd.w), valid = chunk_valid(cd.w);
        const std::size_t rec = static_cast<std::size_t>(cd.z) * kPageHeadBytes;
        {  // both records' loads before either decoding: V's latency hides behind K's decoding
            RawPieces rk, rv;
            rk.load(p.k_cache + rec, valid, tid, Split::rows);
            rv.load(p.v_cache + rec, valid, tid, kQ8 ? Split::quads : Split::pairs);
            if constexpr (kQ8s)
                dequant_k_q8s(rk, kt, tid);
            else
                dequant_pieces<false, kQ8>(rk, kt, tid, WgTile{});
            if constexpr (kQ8)
                dequant_vt_q8(rv, vt, tid);
            else
                dequant_pieces_vt(rv, vt, tid);
        }
        if (tid == 32 && has_next) {
            const std::size_t nrec = static_cast<std::size_t>(next_cd.z) * kPageHeadBytes;
            prefetch_l2_bulk(p.k_cache + nrec, kPageHeadBytes);
            prefetch_l2_bulk(p.v_cache + nrec, kPageHeadBytes);
        }
        // Entry of iteration k of this warp (query begin + warp + 4k) in lane k, with its position.
        int my_code = 0, my_pos = 0;
        if (lane < kQc / 4) chunk_entry(p, begin + warp + 4 * lane, end, my_code, my_pos);
        fence_proxy_async_smem();
        __syncthreads();
        if (tid == 0 && has_next) claim();  // every thread has read s_next (before the barrier above)
        const int n_iter = (end - begin + 3) >> 2;
        // This warp's query rows of iteration k (raw E4M3), loaded one iteration ahead: the load runs under the
        // previous query's MMAs and softmax instead of in front of its own.
        auto query_rows = [&](int k, uint4 (&x)[2][2]) {
            const int code = __shfl_sync(0xffffffffu, my_code, k & 31);
            const bool live = begin + warp + 4 * k < end;
            const std::uint8_t* qb = p.q + (static_cast<std::size_t>(p.t0 + (code >> 4)) * p.nq + g * p.G) * kHeadDim;
            load_rows_raw(live && r < p.G ? qb + r * kHeadDim : nullptr,
                          live && r + 8 < p.G ? qb + (r + 8) * kHeadDim : nullptr, c, x);
        };
        uint4 qx[2][2];
        query_rows(0, qx);
        for (int k = 0; k < n_iter; ++k) {
            const int e = begin + warp + 4 * k;
            const bool live = e < end;
            {  // the query after next into L2
                const int ncode = __shfl_sync(0xffffffffu, my_code, (k + 2) & 31);
                if (lane == 0 && e + 8 < end)
                    prefetch_l2_bulk(p.q + (static_cast<std::size_t>(p.t0 + (ncode >> 4)) * p.nq + g * p.G) * kHeadDim,
                                     static_cast<unsigned>(p.G) * kHeadDim);
            }
            const int code = __shfl_sync(0xffffffffu, my_code, k);
            const int pos = __shfl_sync(0xffffffffu, my_pos, k);
            const int tl = code >> 4, slot = code & 15;
            float s[16][4];  // not initialised: the first wgmma overwrites it (scale-d = 0)
            if constexpr (kQ8s) {
                std::uint32_t qa[4][4];
                q8s_frags_from_raw(qx, qa);
                if (k + 1 < n_iter) query_rows(k + 1, qx);
                wgmma_m64n128k128_e4m3(s, qa, desc_k, kQ8sStepBytes);
            } else {
                std::uint32_t qa[8][4];
                a_perm_from_raw(qx, qa);
                if (k + 1 < n_iter) query_rows(k + 1, qx);
                wgmma_m64n128k128_f16(s, qa, desc_k, kWgStepBytes);
            }
            std::conditional_t<kQ8, QueryProbsQ8, QueryProbs> qp;
            float o[16][4];  // not initialised: the first wgmma overwrites it (scale-d = 0)
            const int lim = live ? pos - b * kBlock : kBlock - 1;  // keys <= lim visible (>= 0: b <= local)
            if constexpr (kQ8) {
                q8_probs(s, lim, c, qp);
                wgmma_m64n128k128_e4m3(o, qp.pa, desc_v, kWgStepBytes);  // k32 steps: 2 chunks of 16 keys each
            } else {
                block_probs(s, lim, c, qp);
                wgmma_m64n128k128_f16(o, qp.pa, desc_v, kWgStepBytes);
            }
            if (!live) continue;
            // o[4q + i][e] (row r; [2 + e]: row r + 8) is dim 32q + 8c + 2i + e (dequant_pieces_vt): four 16-byte
            // streaming stores per row (the partials are read once, by the combine).
            const std::size_t unit = (static_cast<std::size_t>(tl) * p.nkv + g) * p.topk + slot;
            __half* po = p.part_o + unit * 16 * kHeadDim;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (r + 8 * h >= p.G) continue;
                const float inv = qp.inv[h];
                __half* dst = po + (r + 8 * h) * kHeadDim + 8 * c;
#pragma unroll
                for (int q4 = 0; q4 < 4; ++q4)
                    __stcs(reinterpret_cast<uint4*>(dst + 32 * q4),
                           make_uint4(pack_h2(o[4 * q4][2 * h] * inv, o[4 * q4][2 * h + 1] * inv),
                                      pack_h2(o[4 * q4 + 1][2 * h] * inv, o[4 * q4 + 1][2 * h + 1] * inv),
                                      pack_h2(o[4 * q4 + 2][2 * h] * inv, o[4 * q4 + 2][2 * h + 1] * inv),
                                      pack_h2(o[4 * q4 + 3][2 * h] * inv, o[4 * q4 + 3][2 * h + 1] * inv)));
            }
            if (c == 0) {
                if (r < p.G) p.part_lse[unit * 16 + r] = qp.lse[0];
                if (r + 8 < p.G) p.part_lse[unit * 16 + r + 8] = qp.lse[1];
            }
        }
        w = w_next;
        cd_cur = next_cd;
    }
}

// ---------------------------------------------------------------- 6. combine
struct PfCombine {
    const __half* part_o;
    const float* part_lse;
    const int* topk_out;
    float* out;
    int nq, nkv, G, topk, t0;
};
constexpr int kMaxHeads = 256;
__global__ void __launch_bounds__(128) pf_combine_kernel(const PfCombine p) {
    __shared__ float s_w[kMaxHeads][16];
    const int tl = blockIdx.x, t = p.t0 + tl, tid = threadIdx.x;
    for (int qh = tid; qh < p.nq; qh += 128) {
        const int g = qh / p.G, hh = qh - g * p.G;
        const int* row = p.topk_out + (static_cast<std::size_t>(t) * p.nkv + g) * p.topk;
        const float* lse = p.part_lse + ((static_cast<std::size_t>(tl) * p.nkv + g) * p.topk) * 16 + hh;
        float v[16], mx = -CUDART_INF_F;
#pragma unroll
        for (int sl = 0; sl < 16; ++sl) {
            v[sl] = (sl < p.topk && row[sl] >= 0) ? lse[sl * 16] : -CUDART_INF_F;
            mx = fmaxf(mx, v[sl]);
        }
        float den = 0.f;
#pragma unroll
        for (int sl = 0; sl < 16; ++sl) {
            v[sl] = v[sl] == -CUDART_INF_F ? 0.f : exp2f(v[sl] - mx);
            den += v[sl];
        }
        const float inv = den > 0.f ? 1.f / den : 0.f;
#pragma unroll
        for (int sl = 0; sl < 16; ++sl) s_w[qh][sl] = v[sl] * inv;
    }
    __syncthreads();
    // Eight heads per pass, eight dims (one 16-byte load per slot) per thread; the <= 16 partial loads of a head are
    // all issued before the sums. Slots without a pick hold stale workspace bytes (maybe NaN): their products are
    // discarded, never added.
    const int d8 = (tid & 15) * 8;
    for (int qh = tid >> 4; qh < p.nq; qh += 8) {
        const int g = qh / p.G, hh = qh - g * p.G;
        const __half* po = p.part_o + ((static_cast<std::size_t>(tl) * p.nkv + g) * p.topk * 16 + hh) * kHeadDim + d8;
        uint4 v[16];
#pragma unroll
        for (int sl = 0; sl < 16; ++sl)
            v[sl] = sl < p.topk
                        ? __ldcs(reinterpret_cast<const uint4*>(po + static_cast<std::size_t>(sl) * 16 * kHeadDim))
                        : make_uint4(0u, 0u, 0u, 0u);
        float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int sl = 0; sl < 16; ++sl) {
            const float wgt = s_w[qh][sl];
            if (wgt == 0.f) continue;
            const std::uint32_t w[4] = {v[sl].x, v[sl].y, v[sl].z, v[sl].w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
                a[2 * i] += wgt * f.x;
                a[2 * i + 1] += wgt * f.y;
            }
        }
        float4* dst = reinterpret_cast<float4*>(p.out + (static_cast<std::size_t>(t) * p.nq + qh) * kHeadDim + d8);
        dst[0] = make_float4(a[0], a[1], a[2], a[3]);
        dst[1] = make_float4(a[4], a[5], a[6], a[7]);
    }
}

// The attention kernel the options choose (make_prefill_plan sizes its persistent grid, msa_prefill launches it with
// attn_smem(o) bytes of dynamic shared memory).
const void* attn_kernel_for(const MsaPrefillOptions& o) {
    if (o.wgmma) {
        if (o.attn_q8kv4 && o.attn_fp8_scores) return reinterpret_cast<const void*>(pf_attn_wg_kernel<true, true>);
        if (o.attn_q8kv4) return reinterpret_cast<const void*>(pf_attn_wg_kernel<true>);
        return reinterpret_cast<const void*>(pf_attn_wg_kernel<false>);
    }
    return o.attn_queries_per_warp == 1 ? reinterpret_cast<const void*>(pf_attn_kernel<1>)
                                        : reinterpret_cast<const void*>(pf_attn_kernel<2>);
}

int sm_count() {
    int dev = 0, n = 0;
    detail::check(cudaGetDevice(&dev));
    detail::check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}
std::size_t align256(std::size_t x) {
    return (x + 255) & ~std::size_t(255);
}

}  // namespace

MsaPrefillPlan make_prefill_plan(const MsaGeometry& geo, std::span<const MsaPrefillSeq> seqs, int max_blocks,
                                 const MsaPrefillOptions& opt) {
    const int nkv = geo.num_kv_heads;
    const int G = nkv > 0 ? geo.num_q_heads / nkv : 0;
    if (seqs.empty() || nkv < 1 || 128 % nkv != 0 || geo.num_q_heads % nkv != 0 || G < 1 || G > 16 ||
        geo.num_q_heads > kMaxHeads || geo.topk < 1 || geo.topk > 16 || max_blocks < 1 || max_blocks > 8192 ||
        opt.idx_blocks_per_item < 1 || opt.idx_blocks_per_item > 32)
        throw std::invalid_argument("msa::cuda::make_prefill_plan: unsupported geometry");
    MsaPrefillPlan p;
    p.geo = geo;
    p.opt = opt;
    p.batch = static_cast<int>(seqs.size());
    p.max_blocks = max_blocks;
    p.tile_tokens = (opt.wgmma ? kIdxWgRows : 128) / nkv;  // index rows per indexer CTA: 256 (wgmma) or 128
    long long T = 0, TB = 0;
    for (const MsaPrefillSeq& s : seqs) {
        if (s.q_len < 1 || s.kv_len < s.q_len || s.kv_len > 128LL * max_blocks)
            throw std::invalid_argument("msa::cuda::make_prefill_plan: need 1 <= q_len <= kv_len <= 128 * max_blocks");
        p.seq_kv_len.push_back(s.kv_len);
        p.seq_blk_base.push_back(static_cast<int>(TB));
        for (int i = 0; i < s.q_len; ++i) {
            p.tok_seq.push_back(static_cast<int>(&s - seqs.data()));
            p.tok_pos.push_back(s.kv_len - s.q_len + i);
        }
        const int nb = (s.kv_len + kBlock - 1) / kBlock;
        for (int b = 0; b < nb; ++b) {
            p.blk_seq.push_back(static_cast<int>(&s - seqs.data()));
            p.blk_b.push_back(b);
        }
        T += s.q_len;
        TB += nb;
    }
    if (T * nkv >= (1LL << 27) || TB * nkv >= (1LL << 30))
        throw std::invalid_argument("msa::cuda::make_prefill_plan: batch too large");
    p.total_tokens = static_cast<int>(T);
    p.total_blocks = static_cast<int>(TB);
    const int topk = geo.topk;
    const std::size_t N = static_cast<std::size_t>(nkv) * TB;
    // Workspace per window token and fixed parts.
    const std::size_t per_tok = static_cast<std::size_t>(nkv) * max_blocks * 4 +            // scores
                                static_cast<std::size_t>(nkv) * topk * 16 * kHeadDim * 2 +  // partial O
                                static_cast<std::size_t>(nkv) * topk * 16 * 4 +             // partial LSE
                                static_cast<std::size_t>(nkv) * topk * 4 * 2;               // entries, chunks
    // Tiles and indexer items.
    struct Tile {
        int t0, t1, seq, nblk;
    };
    std::vector<Tile> tiles;
    {
        int tok = 0;
        for (int s = 0; s < p.batch; ++s) {
            for (int tt = 0; tt < seqs[s].q_len; tt += p.tile_tokens) {
                const int n = std::min(p.tile_tokens, seqs[s].q_len - tt);
                const int last_pos = seqs[s].kv_len - seqs[s].q_len + tt + n - 1;
                const int local = last_pos / kBlock;
                tiles.push_back({tok + tt, tok + tt + n, s, local + 1 > topk ? local : 0});
            }
            tok += seqs[s].q_len;
        }
    }
    p.idx_key_tiles = opt.wgmma && ((opt.idx_q8kv4 && opt.idx_key_tiles != 1) ||
                                    (opt.idx_key_tiles == 2 && opt.idx_kernel == MsaIdxKernel::smem_q));
    const std::size_t key_tile_bytes = !p.idx_key_tiles ? 0
                                       : opt.idx_q8kv4  ? IdxQ8kv4::kKeyTileBytes
                                                        : IdxExact::kKeyTileBytes;
    std::size_t fixed = 6 * (N + 1) * 4 + (2 * T + 2 * TB + 2 * p.batch) * 4 + 4096 + key_tile_bytes * TB;
    for (const Tile& t : tiles)
        fixed += static_cast<std::size_t>((t.nblk + opt.idx_blocks_per_item - 1) / opt.idx_blocks_per_item) * 32;
    long long W = opt.window_tokens > 0       ? opt.window_tokens
                  : opt.max_workspace > fixed ? static_cast<long long>((opt.max_workspace - fixed) / per_tok)
                                              : 0;
    W = std::max<long long>(W, p.tile_tokens);
    // Windows of whole tiles.
    for (std::size_t i = 0; i < tiles.size();) {
        MsaPrefillPlan::Window w;
        w.t0 = tiles[i].t0;
        w.item0 = static_cast<int>(p.items.size() / 8);
        while (i < tiles.size() && (tiles[i].t1 - w.t0 <= W || tiles[i].t0 == w.t0)) {
            const Tile& t = tiles[i];
            for (int b = 0; b < t.nblk; b += opt.idx_blocks_per_item) {
                const int v[8] = {
                    t.seq, t.t0 * nkv, (t.t1 - t.t0) * nkv, b, std::min(t.nblk, b + opt.idx_blocks_per_item), 0, 0, 0};
                p.items.insert(p.items.end(), v, v + 8);
            }
            w.t1 = t.t1;
            ++i;
        }
        w.item1 = static_cast<int>(p.items.size() / 8);
        p.window_tokens = std::max(p.window_tokens, w.t1 - w.t0);
        p.windows.push_back(w);
    }
    const std::size_t Wt = static_cast<std::size_t>(p.window_tokens);
    const std::size_t picks = Wt * nkv * topk;
    std::size_t off = 0;
    auto take = [&](std::size_t bytes) {
        const std::size_t o = off;
        off += align256(bytes);
        return o;
    };
    p.meta_tok_seq = 0;
    p.meta_tok_pos = p.meta_tok_seq + T;
    p.meta_blk_seq = p.meta_tok_pos + T;
    p.meta_blk_b = p.meta_blk_seq + TB;
    p.meta_seq_kv = p.meta_blk_b + TB;
    p.meta_seq_base = p.meta_seq_kv + p.batch;
    p.meta_off = take((p.meta_seq_base + p.batch) * 4);
    p.items_off = take(std::max<std::size_t>(p.items.size(), 8) * 4);
    p.scores_off = take(Wt * nkv * max_blocks * 4);
    p.counts_off = take(N * 4);
    p.cursor_off = take(N * 4);
    p.num_chunks_off = take(8);  // the window's chunk count, the attention's chunk counter
    p.chunks_off = take((picks / kQc + N + 1) * sizeof(int4));
    p.entries_off = take(picks * 4);
    p.part_o_off = take(picks * 16 * kHeadDim * 2);
    p.part_lse_off = take(picks * 16 * 4);
    p.key_tiles_off = take(key_tile_bytes * TB);
    p.total_bytes = off;
    p.attn_qpw = opt.attn_queries_per_warp == 1 ? 1 : 2;
    const void* attn = attn_kernel_for(opt);
    static bool attrs_set = false;
    if (!attrs_set) {
        auto set_smem = [](const void* f, std::size_t bytes) {
            detail::check(
                cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
        };
        set_smem(reinterpret_cast<const void*>(pf_index_kernel), kIdxSmem);
        set_smem(reinterpret_cast<const void*>(pf_index_wg_kernel), kIdxSmem);
        set_smem(reinterpret_cast<const void*>(pf_index_ss_kernel<IdxExact>), IdxExact::kSmem);
        set_smem(reinterpret_cast<const void*>(pf_index_ss_kernel<IdxQ8kv4>), IdxQ8kv4::kSmem);
        set_smem(reinterpret_cast<const void*>(pf_index_tiled_kernel<IdxExact>), kIdxTiledSmem<IdxExact>);
        set_smem(reinterpret_cast<const void*>(pf_index_tiled_kernel<IdxQ8kv4>), kIdxTiledSmem<IdxQ8kv4>);
        set_smem(reinterpret_cast<const void*>(pf_attn_kernel<1>), kAttnSmem);
        set_smem(reinterpret_cast<const void*>(pf_attn_kernel<2>), kAttnSmem);
        set_smem(reinterpret_cast<const void*>(pf_attn_wg_kernel<false>), kAttnSmem);
        set_smem(reinterpret_cast<const void*>(pf_attn_wg_kernel<true>), kAttnSmem);
        set_smem(reinterpret_cast<const void*>(pf_attn_wg_kernel<true, true>), kAttnSmemQ8s);
        attrs_set = true;
    }
    int per_sm = 0;  // persistent grid: exactly the CTAs that fit at once (a second wave would start late)
    detail::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attn, 128, attn_smem(opt)));
    p.attn_ctas = std::max(1, per_sm) * sm_count();
    return p;
}

void init_prefill_workspace(const MsaPrefillPlan& p, void* workspace, cudaStream_t stream) {
    auto* ws = static_cast<std::uint8_t*>(workspace);
    std::vector<int> meta;
    meta.reserve(p.meta_seq_base + p.batch);
    for (const auto* v : {&p.tok_seq, &p.tok_pos, &p.blk_seq, &p.blk_b, &p.seq_kv_len, &p.seq_blk_base})
        meta.insert(meta.end(), v->begin(), v->end());
    detail::check(cudaMemcpyAsync(ws + p.meta_off, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice, stream));
    if (!p.items.empty())
        detail::check(
            cudaMemcpyAsync(ws + p.items_off, p.items.data(), p.items.size() * 4, cudaMemcpyHostToDevice, stream));
    detail::check(cudaMemsetAsync(ws + p.counts_off, 0, static_cast<std::size_t>(p.num_lists()) * 4, stream));
    detail::check(cudaStreamSynchronize(stream));  // `meta` is a local buffer
}

void msa_prefill(const MsaPrefillPlan& p, const MsaPrefillArgs& a, cudaStream_t stream) {
    auto* ws = static_cast<std::uint8_t*>(a.workspace);
    const int* meta = reinterpret_cast<const int*>(ws + p.meta_off);
    const PfMeta m{meta + p.meta_tok_seq, meta + p.meta_tok_pos, meta + p.meta_blk_seq,
                   meta + p.meta_blk_b,   meta + p.meta_seq_kv,  meta + p.meta_seq_base};
    auto* scores = reinterpret_cast<float*>(ws + p.scores_off);
    auto* counts = reinterpret_cast<unsigned*>(ws + p.counts_off);
    auto* cursor = reinterpret_cast<int*>(ws + p.cursor_off);
    auto* num_chunks = reinterpret_cast<int*>(ws + p.num_chunks_off);
    auto* chunks = reinterpret_cast<int4*>(ws + p.chunks_off);
    auto* entries = reinterpret_cast<int*>(ws + p.entries_off);
    auto* part_o = reinterpret_cast<__half*>(ws + p.part_o_off);
    auto* part_lse = reinterpret_cast<float*>(ws + p.part_lse_off);
    const int nkv = p.geo.num_kv_heads, nq = p.geo.num_q_heads, G = nq / nkv, topk = p.geo.topk;
    const int N = p.num_lists();
    auto* key_tiles_ws = ws + p.key_tiles_off;
    if (p.idx_key_tiles) {
        const PfKeyTiles kp{a.ik_cache, a.page_table, m, key_tiles_ws, p.max_blocks};
        if (p.opt.idx_q8kv4)
            pf_key_tiles_kernel<IdxQ8kv4><<<p.total_blocks, 128, 0, stream>>>(kp);
        else
            pf_key_tiles_kernel<IdxExact><<<p.total_blocks, 128, 0, stream>>>(kp);
    }
    for (const MsaPrefillPlan::Window& w : p.windows) {
        const int rows = (w.t1 - w.t0) * nkv;
        if (w.item1 > w.item0) {
            const PfIdx ip{a.iq,         a.ik_cache,   a.page_table, reinterpret_cast<const int4*>(ws + p.items_off),
                           scores,       p.max_blocks, w.t0 * nkv,   w.item0,
                           key_tiles_ws, m.seq_base};
            if (p.idx_key_tiles && p.opt.idx_q8kv4)
                pf_index_tiled_kernel<IdxQ8kv4><<<w.item1 - w.item0, 128, kIdxTiledSmem<IdxQ8kv4>, stream>>>(ip);
            else if (p.idx_key_tiles)
                pf_index_tiled_kernel<IdxExact><<<w.item1 - w.item0, 128, kIdxTiledSmem<IdxExact>, stream>>>(ip);
            else if (p.opt.wgmma && p.opt.idx_q8kv4)
                pf_index_ss_kernel<IdxQ8kv4><<<w.item1 - w.item0, 128, IdxQ8kv4::kSmem, stream>>>(ip);
            else if (p.opt.wgmma && p.opt.idx_kernel == MsaIdxKernel::smem_q)
                pf_index_ss_kernel<IdxExact><<<w.item1 - w.item0, 128, IdxExact::kSmem, stream>>>(ip);
            else if (p.opt.wgmma)
                pf_index_wg_kernel<<<w.item1 - w.item0, 128, kIdxSmem, stream>>>(ip);
            else
                pf_index_kernel<<<w.item1 - w.item0, 128, kIdxSmem, stream>>>(ip);
        }
        const PfTopk tp{scores, m, a.topk_out, counts, p.max_blocks, nkv, topk, p.total_blocks, w.t0, rows};
        pf_topk_kernel<<<(rows + 3) / 4, 128, 0, stream>>>(tp);
        pf_scan_kernel<<<1, kScanThreads, 0, stream>>>(
            PfScan{counts, cursor, num_chunks, chunks, m, a.page_table, N, p.total_blocks, p.max_blocks});
        const int n = rows * topk;
        pf_fill_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
            PfFill{a.topk_out, m, cursor, entries, nkv, topk, p.total_blocks, w.t0, n});
        PfAttn ap{a.q, a.k_cache, a.v_cache, m, num_chunks, chunks, entries, part_o, part_lse, nq, nkv, G, topk, w.t0};
        void* attn_args[] = {&ap};
        detail::check(cudaLaunchKernel(attn_kernel_for(p.opt), dim3(static_cast<unsigned>(p.attn_ctas)), dim3(128),
                                       attn_args, attn_smem(p.opt), stream));
        pf_combine_kernel<<<w.t1 - w.t0, 128, 0, stream>>>(
            PfCombine{part_o, part_lse, a.topk_out, a.out, nq, nkv, G, topk, w.t0});
        detail::check(cudaGetLastError());
    }
}

}  // namespace msa::cuda
