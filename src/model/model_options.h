// Choices a user or test makes when loading the model (the config and checkpoint fix everything else).
#pragma once

#include "formats/kv_cache_dtype.h"
#include "kernels/kernel_types.h"

#include <cstdint>
#include <optional>

namespace msa {

struct ModelOptions {
    // KV-cache element type; default: the config's quantization_config.kv_cache_quant_algo, else BF16.
    std::optional<KvCacheDtype> kv_cache_dtype;
    // Size of the KV page pool (pages of 128 tokens, all layers). The engine's block manager hands out ids in
    // [0, num_kv_pages).
    std::int32_t num_kv_pages = 64;
    // Attention and indexer numerics: exact FP32 (the parity mode) or MiniMax's Q8KV4 contract (msa.md section 5).
    AttentionNumerics attention_numerics = AttentionNumerics::exact;
    // MSA top-k ranking: MiniMax's 16-bit keyed selection (default) or exact float scores.
    TopkMode topk_mode = TopkMode::keyed;
    // GEMM activations: int8 for NVFP4 weights (fast) or exact FP32. M3.1's W4A4 experts follow the model's own
    // activation quantisation in both modes.
    ActivationMode activations = ActivationMode::int8;
    // Experiments: run every layer with dense attention, or override sparse_topk_blocks (0 keeps the config's).
    bool dense_attention = false;
    int topk_blocks = 0;
};

}  // namespace msa
