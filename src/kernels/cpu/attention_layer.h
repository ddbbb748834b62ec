// The attention core of one layer on the CPU (Backend::attention): per-head norms, partial RoPE, KV insert,
// then dense attention or MSA (indexer, top-k, sparse attention).
#pragma once

#include "kernels/backend.h"

#include <span>

namespace msa::cpu {

void attention_layer(const AttentionLayer& layer, std::span<const AttentionSeq> seqs, float* q, float* k,
                     const float* v, float* index_q, float* index_k, float* out, const AttentionOptions& options);

}  // namespace msa::cpu
