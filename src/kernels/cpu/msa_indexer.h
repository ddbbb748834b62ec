// The MSA index branch on paged storage (msa.md sections 2-3): block scores of index queries against the index keys
// stored in the KV pages (NVFP4, FP8 or BF16, read block by block), with the causal mask, reduced by max per block;
// then the top-k selection per (query, index head).
//
// Numerics: exact mode uses the FP32 index queries and exactly dequantised index keys; q8kv4 mode rounds the index
// queries to E4M3 and the keys once to E4M3, as MiniMax's kernels do. Scores accumulate in FP32 (the 1/sqrt(d)
// scale is omitted: it does not change the selection).
#pragma once

#include "kernels/cpu/attention.h"
#include "kernels/cpu/msa_topk.h"
#include "kernels/kv_layout.h"

#include <cstdint>
#include <span>

namespace msa::cpu {

struct MsaIndexOptions {
    int topk = 16;
    TopkMode topk_mode = TopkMode::keyed;
    AttentionNumerics numerics = AttentionNumerics::exact;
};

// Block scores of queries [i0, i1) of one sequence for all `groups` index heads:
// scores[((i - i0) * groups + g) * ld + b] for b <= pos(i) / 128 (entries beyond a query's local block are
// untouched). iq: the batch's index queries [tokens][groups][dim] (the sequence's rows start at seq.q_offset).
void msa_block_scores(const PagedRows& index_k, const AttentionSeq& seq, const float* iq, int groups,
                      std::int32_t i0, std::int32_t i1, AttentionNumerics numerics, float* scores, std::int64_t ld);

// Selected blocks for every query of the batch: selected[token][g][0..topk), see msa_topk.h for the row layout.
// A query at a negative position gets an all -1 row.
void msa_select_blocks(const PagedRows& index_k, std::span<const AttentionSeq> seqs, const float* iq, int groups,
                       const MsaIndexOptions& options, std::int32_t* selected);

}  // namespace msa::cpu
