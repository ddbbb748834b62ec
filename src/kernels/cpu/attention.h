// Causal GQA attention over paged KV storage: dense (every visible block) and MSA sparse (the blocks selected per
// query and KV group by msa_indexer.h). Both run the same code: a query attends to its blocks in ascending block
// order with an online softmax, so dense and sparse agree bit for bit when the selection covers every block, and a
// query's result never depends on the other queries of the batch (decode after prefill equals one long prefill).
//
// Numerics (msa.md section 5):
//  - exact: Q as given (FP32), K and V dequantised exactly, logits (q.k) * scale in FP32, softmax in FP32.
//  - q8kv4: Q rounded to E4M3 (saturating RNE, from FP32), K and V rounded once to E4M3 (NVFP4: e2m1*scale rounded),
//    per block P = exp(s - running max), the PV product uses E4M3(P * 448) and is scaled by 1/448, the denominator
//    uses the unquantised FP32 P. Blocks are combined with the online softmax in ascending block order (MiniMax's
//    decode formulation; its prefill kernel's BF16 rounding of per-page partials is not reproduced).
#pragma once

#include "kernels/kernel_types.h"
#include "kernels/kv_layout.h"

#include <cstdint>
#include <span>

namespace msa::cpu {

using msa::AttentionNumerics;
using msa::AttentionSeq;
using msa::query_position;

struct AttentionShape {
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    float softmax_scale = 0.0f;  // 1 / sqrt(head_dim)
};

// q, out: [tokens][num_heads][head_dim]. A query at a negative position gets a zero output.
void dense_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                     const AttentionShape& shape, AttentionNumerics numerics, float* out);

// selected: [tokens][num_kv_heads][topk] block ids (local block included, -1 padding), as msa_select_blocks writes.
void sparse_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                      const std::int32_t* selected, int topk, const AttentionShape& shape,
                      AttentionNumerics numerics, float* out);

}  // namespace msa::cpu
