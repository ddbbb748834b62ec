// Hopper (sm_90a) CUDA kernels for MSA prefill with an NVFP4 KV cache (issue 7): the prefill indexer (block maxima
// of a variable-length chunk's index queries against the index keys of prefix + chunk, keyed top-k with the local
// block last, per query and index group) and the "KV outer, gather Q" sparse attention of msa.md section 7 (for
// each selected (KV head, block), the queries that picked it are gathered; one CTA dequantises the block once and
// serves them; per-query partial outputs are merged by log-sum-exp).
//
// Batches of sequences: sequence s appends q_len[s] tokens to a sequence whose length, chunk included, is
// kv_len[s]; its tokens sit at rows [q_offset(s), q_offset(s) + q_len[s]) of the flattened token arrays (sequences
// in batch order). The chunk's own K, V and index-K rows must already be in the cache (kv_insert of msa_decode.h).
// Cache layouts as in msa_decode.h.
//
// Plans are built on the host (outside graph capture) from the host-side lengths; msa_prefill() only launches
// kernels with fixed grids and memsets, so it can be captured in a CUDA graph and replayed with new data of the same
// shape. Queries are processed in windows of whole indexer tiles so that the workspace stays bounded.
#pragma once
#include "msa_decode.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace msa::cuda {

struct MsaPrefillSeq {
    int q_len = 0;   // new tokens of this sequence in the call (>= 1)
    int kv_len = 0;  // sequence length including them (>= q_len)
};

// The wgmma indexer kernels (docs/cuda-notes.md section 19).
enum class MsaIdxKernel {
    smem_q,  // 256-row query tile converted to FP16 once per item in shared memory, A and B from shared memory,
             // two M = 64 passes in flight (2 CTAs per SM)
    pass_q,  // 256-row tiles, each pass's query rows loaded from L2 into registers for every block (4 CTAs per SM)
};

struct MsaPrefillOptions {
    std::size_t max_workspace = std::size_t(3) << 30;  // bytes; fixes the query window
    int window_tokens = 0;                             // > 0: force the window (tokens, rounded to whole tiles)
    int idx_blocks_per_item = 16;   // index-K blocks one indexer CTA scores with its query tile (1..32)
    int attn_queries_per_warp = 1;  // mma.sync attention: 1 or 2 gathered queries per warp at a time
    // indexer and attention on warpgroup MMAs (sm_90a wgmma); false: the warp-level mma.sync kernels
    bool wgmma = true;
    // which wgmma indexer kernel (MsaIdxKernel)
    MsaIdxKernel idx_kernel = MsaIdxKernel::smem_q;
    // wgmma indexer in msa.md's Q8KV4 contract (index keys rounded once to E4M3, FP8 MMAs:
    // pf_index_ss_kernel<IdxQ8kv4>) instead of exactly dequantised keys; the block scores then differ from the exact
    // ones by that rounding and by the FP8 tensor cores' accumulation (docs/cuda-notes.md section 24)
    bool idx_q8kv4 = false;
    // wgmma attention in the Q8KV4 contract (K and V rounded once to E4M3, P V on FP8 MMAs with E4M3(448 P): msa.md
    // section 5, per selected block as MiniMax's prefill kernel) instead of exact K/V and FP16 P
    bool attn_q8kv4 = false;
    // with attn_q8kv4: S = Q K^T on FP8 wgmma as well (E4M3 queries and keys are the contract's values, but Hopper's
    // FP8 tensor cores sum them with about 13 mantissa bits instead of FP32: docs/cuda-notes.md section 25)
    bool attn_fp8_scores = false;
    // The indexer on converted key tiles: each index-key block converted once per call into the indexer's tile bytes
    // in the workspace (16 KB per block in Q8KV4, 32 KB exact) and streamed into the indexer CTAs by bulk copies,
    // instead of every (query tile, block) item dequantising its blocks again; the same scores bit for bit
    // (docs/cuda-notes.md section 26). 0 = with the Q8KV4 indexer (session 21: 128K 39.8 -> 37.1-38.2 ms), 1 = off,
    // 2 = with the exact wgmma indexer too (its 64 KB FP16 query tile and 32 KB key tiles leave 1 CTA per SM: slower,
    // 46.5 -> 47.9 ms).
    int idx_key_tiles = 0;
};

struct MsaPrefillPlan {
    MsaGeometry geo;
    MsaPrefillOptions opt;
    int batch = 0, max_blocks = 0, total_tokens = 0, total_blocks = 0;
    int tile_tokens = 0;         // tokens of one indexer tile (256 or, without wgmma, 128 index rows / num_kv_heads)
    int window_tokens = 0;       // largest window
    int attn_ctas = 0;           // persistent attention grid
    int attn_qpw = 1;            // mma.sync attention: gathered queries per warp at a time (MsaPrefillOptions)
    bool idx_key_tiles = false;  // the indexer on converted key tiles (MsaPrefillOptions::idx_key_tiles)
    struct Window {
        int t0 = 0, t1 = 0;        // flattened token range
        int item0 = 0, item1 = 0;  // indexer work items
    };
    std::vector<Window> windows;
    // Host metadata uploaded by init_prefill_workspace.
    std::vector<int> tok_seq, tok_pos, blk_seq, blk_b, seq_kv_len, seq_blk_base;
    std::vector<int> items;  // 8 ints per indexer item: seq, first index row, rows, first block, end block, 0, 0, 0
    // Workspace (device) offsets.
    std::size_t meta_off = 0, items_off = 0, scores_off = 0, counts_off = 0, cursor_off = 0, num_chunks_off = 0,
                chunks_off = 0, entries_off = 0, part_o_off = 0, part_lse_off = 0,
                key_tiles_off = 0;  // idx_key_tiles: total_blocks tiles
    std::size_t meta_tok_seq = 0, meta_tok_pos = 0, meta_blk_seq = 0, meta_blk_b = 0, meta_seq_kv = 0,
                meta_seq_base = 0;  // int offsets inside the metadata block
    std::size_t total_bytes = 0;
    int num_lists() const { return geo.num_kv_heads * total_blocks; }
};

// Throws std::invalid_argument on unsupported shapes (num_kv_heads must divide 128, GQA ratio 1..16, topk 1..16,
// 1 <= q_len <= kv_len, kv_len <= 128 * max_blocks, max_blocks <= 8192, idx_blocks_per_item 1..32).
MsaPrefillPlan make_prefill_plan(const MsaGeometry& geo, std::span<const MsaPrefillSeq> seqs, int max_blocks,
                                 const MsaPrefillOptions& opt = {});
// Uploads the plan's metadata into the workspace and zeroes its counters (once, outside capture; every call leaves
// the counters at zero again). Synchronous with respect to the host buffers of the plan (they must stay alive
// until the stream reaches this point).
void init_prefill_workspace(const MsaPrefillPlan& plan, void* workspace, cudaStream_t stream);

struct MsaPrefillArgs {
    const std::uint8_t* q;   // E4M3 [tokens][num_q_heads][128] (16-byte aligned, as q and iq are read in 16 B)
    const std::uint8_t* iq;  // E4M3 [tokens][num_kv_heads][128]
    const std::uint8_t* k_cache;
    const std::uint8_t* v_cache;
    const std::uint8_t* ik_cache;
    const int* page_table;  // [batch][max_blocks]
    float* out;             // FP32 [tokens][num_q_heads][128]
    int* topk_out;          // [tokens][num_kv_heads][topk] logical block ids (-1 padded, local last)
    void* workspace;        // plan.total_bytes, initialised by init_prefill_workspace
};
// Numerics: index scores exact (E4M3 index queries times exactly dequantised index keys, FP16 operands, FP32
// accumulation); attention per selected block with exact FP16 Q and K/V, FP32 logits and softmax, P rounded to
// FP16 for PV, per-block partial outputs stored in FP16 and merged by LSE in FP32.
void msa_prefill(const MsaPrefillPlan& plan, const MsaPrefillArgs& a, cudaStream_t stream);

}  // namespace msa::cuda
