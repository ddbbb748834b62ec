// Causal GQA attention over paged KV storage: dense (every visible block) and MSA sparse (the blocks selected per
// query and KV group by msa_indexer.h). Both run the same code, and a row's result is a fixed function of its own
// blocks: the max m over all its visible logits first, then per block p = exp(s - m), the block's sum and its PV
// partial (computed from zero), added in ascending block order. So dense and sparse agree bit for bit when the
// selection covers every block, a query's result never depends on the other queries of the batch (decode after
// prefill equals one long prefill), and decode may cut a row's blocks over threads (split-KV) without changing a bit.
//
// Numerics (msa.md section 5):
//  - exact: Q as given (FP32), K and V dequantised exactly, logits (q.k) * scale in FP32, softmax in FP32.
//  - q8kv4: Q rounded to E4M3 (saturating RNE, from FP32), K and V rounded once to E4M3 (NVFP4: e2m1*scale rounded),
//    P = exp(s - m) with m the row's max over all its selected keys (tools/reference/README.md; msa.md says "the
//    running max", which for MiniMax's decode kernel is the max so far: the same softmax, other roundings of P), the
//    PV product uses E4M3(P * 448) and is scaled by 1/448, the denominator uses the unquantised FP32 P. MiniMax's
//    prefill kernel's BF16 rounding of per-page partials is not reproduced.
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
