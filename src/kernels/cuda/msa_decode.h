// Hopper (sm_90a) CUDA kernels for MSA decode with an NVFP4 KV cache (issue 7).
// Cache layout (formats.md section 5): per (page, kv head) one 9216-byte record: 128 tokens x 64 bytes of E2M1
// pairs (element 2i low nibble), then 128 tokens x 8 E4M3 scales (one per 16 channels). K and V caches are
// [num_pages][kv heads][9216 B]; the index-K cache is [num_pages][9216 B]. A page holds positions
// [128 b, 128 b + 127] of the sequence whose page table maps logical block b to it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace msa::cuda {

inline constexpr int kHeadDim = 128;
inline constexpr int kBlock = 128;
inline constexpr int kPageHeadBytes = kBlock * 64 + kBlock * 8;  // 9216

struct MsaGeometry {
    int num_q_heads = 64;
    int num_kv_heads = 4;   // == number of index heads
    int topk = 16;          // sparse_topk_blocks (<= 16)
};

// KV insert: Gemma RMSNorm per head (x * rsqrt(mean x^2 + eps) * (1 + w)) on K and index-K, partial NeoX RoPE
// (rotary_dim 64, pairs (i, i+32), inv_freq = theta^(-i/32)) on K and index-K, NVFP4 quantisation (formats.md 3)
// of K, V and index-K. Inputs FP32: k,v [T][kv_heads][128], ik [T][128]; positions[T]; seq_of_token[T] picks the
// row of page_table [batch][max_blocks] that maps pos/128 to a physical page.
struct KvInsertArgs {
    const float* k; const float* v; const float* ik;
    const float* k_norm_w; const float* ik_norm_w;
    const int* positions; const int* seq_of_token;
    const int* page_table; int max_blocks;
    int num_tokens; int num_kv_heads;
    float eps = 1e-6f; float rope_theta = 10000.0f;
    std::uint8_t* k_cache; std::uint8_t* v_cache; std::uint8_t* ik_cache;
};
void kv_insert(const KvInsertArgs& a, cudaStream_t stream);

// Which implementation runs each decode stage. kMma (default): tensor-core kernels (two launches: indexer with
// the keyed top-k fused at its end, sparse attention with the split-KV merge fused at its end). kSimt: the first,
// correctness-first FP32 kernels (four launches), kept as a cross-check.
enum class MsaImpl : int { kMma = 0, kSimt = 1 };

struct MsaDecodeOptions {
    MsaImpl indexer = MsaImpl::kMma;
    MsaImpl attention = MsaImpl::kMma;
    bool pdl = true;            // programmatic dependent launch: the attention after the indexer, and the indexer
                                // after whatever the stream ran before. Before their grid-dependency waits the
                                // indexer reads seq_lens, page_table and complete (history) blocks of ik_cache,
                                // the attention q and seq_lens: no kernel that may still run when msa_decode's
                                // kernels start (with PDL: the one launched just before) may write them.
    int attn_splits = 0;        // split-KV CTAs per (query, kv head); 0 = chosen from the shape and the SM count
    int idx_pages_per_warp = 0; // indexer work items (pages or page parts) per warp; 0 = chosen from the shape
    int idx_parts = 0;          // 1, 2 or 4 token ranges per index-K page (one per warp); 0 = chosen from the shape
    // Split-KV merge of the attention: 0 = chosen (a thread-block cluster of the splits merging through distributed
    // shared memory when the splits fit one cluster, else the workspace + last-CTA merge), 1 = always the workspace
    // merge, 2 = the cluster merge whenever splits > 1 (falls back when the device cannot run the cluster).
    int attn_cluster = 0;
    // L2 prefetch of the selected K/V pages by the indexer's top-k: 0/1 = off, 2 = on. Measured a loss (run 4:
    // the prefetches all leave from the one SM running a request's top-k; 1 x 32K 19.9 -> 38.4 us).
    int prefetch = 0;
    // Indexer grid: 0/1 = one CTA per work unit, 2 = persistent (about one wave of CTAs taking work units from a
    // counter; measured slower in run 5). idx_ctas > 0 caps the persistent grid (tests).
    int idx_persistent = 0;
    int idx_ctas = 0;
    // How the attention waits for the top-k: 1 = the grid dependency (griddepcontrol.wait), 2 = per-request ready
    // flags (the indexer CTA that ran a request's top-k publishes it; the attention CTAs, launched early by PDL,
    // start when their request is ready), 0 = flags from 16 (query, kv head) units up (session 6 sweep: 2-9% faster
    // from 4 x 32K up, 32 x 128K with 8 queries 326.9 -> 304.0 us; 0.3-0.4 us slower at batch 1-2).
    int attn_ready = 0;
    // Attention page pipeline: 0 = per warp when a CTA streams >= 3 pages, 1 = CTA-wide (all threads copy whole K/V
    // pages, two barriers per page), 2 = per warp (each warp copies and waits only for its own 32-token slices, three
    // stages; V overlaps S).
    int attn_warp_pipe = 0;
    // 1 = launch the indexer without PDL even when pdl is on (only the attention overlaps the indexer's tail).
    int idx_pdl = 0;
    // Attention CTA size: 4 = 4 warps (32 tokens of each page per warp, warps merged through shared memory), 8 = 8
    // warps (the latency kernel: S split by tokens, P V by output dims, no warp merge, the cluster merge by st.async),
    // used only with one split or the cluster merge; 0 = 8 when the cluster merge has at most 64 CTAs (one-query
    // steps of at most 16 units take 64 / units splits for it: session 15, 1 x 32K 12.5 -> 9.2 us, 2 x 8K 14.9 ->
    // 10.3), else 4.
    int attn_warps = 0;
    // Where a row's top-k runs: 1 = the indexer's last CTA of each request (its 4 warps loop over the request's
    // rows), 2 = every attention CTA runs its own row's (split 0 writes topk_out; the other splits of the row compute
    // the same picks), 0 = 2 for several queries per request or at most 16 (query, kv head) units, else 1. Session 6
    // (1 -> 2): 1 x 8K 14.5 -> 12.3 us, 1 x 32K 15.3 -> 13.0, 1 x 128K 21.1 -> 18.6, 8 x 32K with 8 queries 86.3 ->
    // 72.2, 32 x 128K with 8 queries 307.4 -> 299.6; but 32 x 128K 126.2 -> 138.0 (4 splits each redo the row).
    int attn_topk = 0;
    // Index-query n-tiles (8 index rows each) scored per pass over a decoded page: 0 = as many as fit (1, 2 or 4),
    // else 1, 2 or 4 (fewer registers and more resident warps, but a page is decoded once per pass).
    int idx_nt_pass = 0;
    // Index scores of one-query steps (<= 4 index heads) by FP8 tensor cores: E2M1 codes as E4M3, key scales applied
    // in FP32 after each MMA (msa.md section 5). 0 = on where it applies, on wgmma unless the indexer is persistent
    // (then mma.sync); 1 = off (FP16 MMA of exactly dequantised keys); 2 = FP8 on mma.sync (which sm_90 runs as FP16
    // MMAs); 3 = FP8 on wgmma.
    int idx_fp8 = 0;
    // 5-8-query steps (17-32 index rows) on wgmma m64n32k16 with exactly dequantised FP16 keys (half pages, 4 CTAs per
    // SM, the next m-tile decoded while the wgmmas run): 0 = on, 1 = off (the 4-n-tile mma.sync indexer; session 18:
    // 8-10% slower at 32 x 128K and 32 x 32K, 15% at 8 x 200K).
    int idx_q8_wgmma = 0;
    // When the indexer lets the attention grid launch (griddepcontrol.launch_dependents): 2 = right after its own
    // grid-dependency wait, so the attention CTAs become resident as soon as the indexer's last wave has started;
    // 1 = after each CTA's scores (up to session 12); 0 = 2 unless the attention is a 4-warp cluster launch (session
    // 13 sweep: early 4-8% faster from 32 x 32K up without clusters, 0.3-3.5 us slower with them; session 15: 0.3-1.3
    // us faster with the 8-warp attention at batch 1).
    int idx_trigger = 0;
    // Attention CTA order: 2 = request-major (splits, then kv heads, then queries along the linear block id) unless
    // the splits form clusters; 0/1 = grid order (queries fastest; session 13: request-major was 2-9 us slower).
    int attn_order = 0;
    // The lean 4-warp attention without the cluster merge: 4 CTAs per SM instead of 3 (at most 128 registers: the Q
    // fragments in shared memory; 40 KB: two per-warp pipeline stages instead of three), the same results bit for bit.
    // 0 = where each CTA streams 16 pages (one split; session 18: 2.5% faster with 8 queries at 32 x 128K, 11% with one
    // query at 128 x 8K, slower with 3-4 splits), 1 = off, 2 = wherever it applies.
    int attn_lean = 0;
};

// Decode plan: built on the host outside graph capture; fixes every grid so the launches are capturable.
struct MsaDecodePlan {
    MsaGeometry geo;
    MsaDecodeOptions opt;
    int batch = 0;
    int q_len = 1;           // queries per request (1..16)
    int max_blocks = 0;      // page-table row length; upper bound on blocks per sequence (<= 8192)
    int rows = 0;            // q_len * num_kv_heads: index rows per request
    int idx_ntiles = 0;      // ceil(rows / 8): MMA n-tiles of index queries
    int idx_nt_pass = 0;     // n-tiles per pass over a page (1, 2 or 4)
    bool idx_fp8 = false;    // FP8 indexer (MsaDecodeOptions::idx_fp8)
    bool idx_wgmma = false;  // ... on wgmma
    bool idx_wq8 = false;    // 5-8-query indexer on wgmma (MsaDecodeOptions::idx_q8_wgmma)
    int idx_parts = 1;       // token ranges a page is split into across warps (1, 2 or 4; >1 only for few pages)
    int idx_items_per_cta = 0, idx_chunks = 0;  // work items (page parts) per indexer CTA; CTAs per request
    std::size_t idx_smem = 0;
    bool idx_persistent = false;
    int idx_grid = 0;        // persistent CTAs
    int attn_splits = 1, attn_pages_per_split = 16;
    bool attn_cluster = false;  // splits of one (query, kv head) form a cluster and merge through DSMEM
    bool prefetch = false;      // the top-k prefetches the selected K/V pages into L2
    bool attn_ready = false;    // per-request ready flags between the indexer and the attention
    bool attn_warp_pipe = false;
    int attn_warps = 4;         // warps per attention CTA
    bool attn_topk = false;     // the attention CTAs run the top-k (MsaDecodeOptions::attn_topk)
    bool idx_early_trigger = false;  // MsaDecodeOptions::idx_trigger
    bool attn_req_major = false;     // MsaDecodeOptions::attn_order
    bool attn_lean = false;          // MsaDecodeOptions::attn_lean
    // Workspace (device) offsets into the caller's buffer of total_bytes; call init_decode_workspace once after
    // allocating it (it zeroes the arrival counters, which every call leaves at zero again).
    std::size_t scores_off = 0, sel_pages_off = 0, partial_o_off = 0, partial_lse_off = 0, counters_off = 0;
    std::size_t total_bytes = 0;
};
MsaDecodePlan make_decode_plan(const MsaGeometry& geo, int batch, int q_len, int max_blocks,
                               const MsaDecodeOptions& opt = {});
void init_decode_workspace(const MsaDecodePlan& plan, void* workspace, cudaStream_t stream);

struct MsaDecodeArgs {
    const std::uint8_t* q;         // E4M3 [batch][q_len][num_q_heads][128]
    const std::uint8_t* iq;        // E4M3 [batch][q_len][num_kv_heads][128]
    const std::uint8_t* k_cache; const std::uint8_t* v_cache; const std::uint8_t* ik_cache;
    const int* page_table;         // [batch][max_blocks]
    const int* seq_lens;           // [batch] kv_len including the q_len new tokens
    float* out;                    // FP32 [batch][q_len][num_q_heads][128]
    int* topk_out;                 // [batch][q_len][num_kv_heads][topk] logical block ids (-1 padded, local last)
    void* workspace;               // plan.total_bytes, initialised by init_decode_workspace
};
// Numerics (kMma): Q and index-Q E4M3 exactly in FP16 (times 2^7), K/V/index-K dequantised exactly to FP16 as
// e2m1*scale*2^-7, FP32 accumulation on the tensor cores; softmax in FP32, P rounded to FP16 for the PV product.
void msa_decode(const MsaDecodePlan& plan, const MsaDecodeArgs& a, cudaStream_t stream);

// Phase timeline for latency work. Only builds with -DMSA_DECODE_TRACE write it (bench/cuda/msa_decode_bench.cu
// "trace" mode; docs/cuda-notes.md); in other builds the pointer is kept and never used. Every msa_decode call made
// (or captured) while buf is set records, for each event, the earliest %globaltimer value (ns) over the CTAs that
// reach it in buf[event] (atomicMin) and the latest in buf[kDecodeTraceEvents + event] (atomicMax); the caller
// initialises the first half to all-ones bits and the second to zero. Null turns it off.
enum DecodeTraceEvent : int {
    kTrIdxStart,      // indexer CTA entered (before the grid-dependency wait)
    kTrIdxWaited,     // ... past the wait: the previous kernel of the stream has completed
    kTrIdxFirstImage, // ... first work item's keys in shared memory (warp 0; FP8 wgmma indexer only)
    kTrIdxScored,     // ... all its block maxima written (CTA barrier before the arrival atomic)
    kTrTopkStart,     // last CTA of a request: top-k begins
    kTrTopkLoaded,    // ... row 0's scores loaded and reduced to min and max
    kTrTopkInserted,  // ... row 0's per-lane top-15 lists built
    kTrTopkEnd,       // ... top-k rows written
    kTrAttnStart,     // attention CTA entered
    kTrAttnWaited,    // ... past the wait for the indexer
    kTrAttnPages,     // ... selected pages read (CTA barrier)
    kTrAttnComputed,  // ... all its warps done with the pages (CTA barrier before the merge)
    kTrAttnSlabs,     // ... the warps' partial outputs in shared memory (CTA barrier)
    kTrAttnMerged,    // ... its warps' partials merged (before the cluster barrier / the partial stores)
    kTrAttnSynced,    // ... past the cluster barrier (cluster merge) or the arrival atomic (workspace merge)
    kTrAttnWeighted,  // ... cluster merge: merge weights computed (CTA barrier)
    kTrAttnStored,    // ... cluster merge: outputs stored (before the last cluster barrier)
    kTrAttnEnd,       // ... about to exit
    kDecodeTraceEvents
};
void set_decode_trace(unsigned long long* buf);

}  // namespace msa::cuda
