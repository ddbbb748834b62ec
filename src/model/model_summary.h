// Figures about a model that a user wants before serving it (`msa info`), and that capacity planning needs:
// parameters and bytes by storage format, KV-cache bytes per token, and how many sequences fit in GPU memory.
//
// Weights are counted from the shard headers when the safetensors files are present (exact), or estimated from
// config.json alone (the tensor list of model_weight_specs, with formats assumed from quantization_config; the
// assumptions are listed).
#pragma once

#include "formats/kv_cache_dtype.h"
#include "formats/safetensors_reader.h"
#include "model/checkpoint_weights.h"
#include "model/model_config.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace msa {

struct ParamCount {
    std::uint64_t tensors = 0;  // stored tensors (a linear module counts its weight and scale tensors)
    std::uint64_t params = 0;   // logical parameters (an NVFP4 byte holds two)
    std::uint64_t bytes = 0;    // stored bytes, scales included

    void add(const ParamCount& other) {
        tensors += other.tensors;
        params += other.params;
        bytes += other.bytes;
    }
};

struct WeightSummary {
    bool from_headers = false;                     // false: estimated from config.json
    std::map<WeightFormat, ParamCount> by_format;  // text weights by storage format
    std::map<WeightGroup, ParamCount> by_group;    // embedding, attention, MSA indexer, routed experts, ...
    std::map<std::string, ParamCount> by_dtype;    // every stored tensor by safetensors dtype (headers only)
    ParamCount total;                              // the text model the engine loads
    std::uint64_t active_params = 0;               // per token: routed experts counted top-k of E
    std::uint64_t embedding_params = 0;            // embedding + lm_head (for "active without embeddings")
    ParamCount vision;                             // vision tensors (skipped)
    ParamCount unused;                             // other tensors not loaded (e.g. MTP)
    std::vector<std::string> notes;                // how the figures were obtained (assumed formats, ...)
};

// Exact figures from bound weights (the checkpoint's shard headers).
WeightSummary summarize_weights(const ModelConfig& config, const CheckpointWeights& weights,
                                const Checkpoint& checkpoint);
// Estimate from config.json alone: formats from quantization_config (quant_method "mxfp8": every projection
// MXFP8; moe_activation_quant "nvfp4_row_scaled": routed experts NVFP4; absent: the config dtype), router F32,
// norms, embedding and lm_head in the config dtype (BF16 by default).
WeightSummary estimate_weights(const ModelConfig& config);

// KV-cache bytes per token on one GPU rank with tensor parallelism `tp` (K/V heads split across ranks, at least
// one per rank; the single index-key head is replicated on every rank). tp = 1 gives the whole model's figure.
struct KvFootprint {
    KvCacheDtype dtype = KvCacheDtype::NVFP4;
    std::uint64_t kv_bytes = 0;     // K and V, all layers
    std::uint64_t index_bytes = 0;  // index keys, MSA layers
    std::uint64_t total() const { return kv_bytes + index_bytes; }
};
// Throws msa::Error when tp neither divides num_key_value_heads nor is a multiple of it.
KvFootprint kv_footprint(const ModelConfig& config, KvCacheDtype dtype, int tp);

struct CapacityRequest {
    std::int64_t context_tokens = 131072;
    double gpu_memory_gib = 141;      // per GPU
    double memory_utilization = 0.9;  // fraction of each GPU the engine may use (weights + KV cache)
    int tp = 1;
};

struct CapacityPlan {
    KvFootprint per_token;                 // per rank
    std::uint64_t usable_bytes = 0;        // per rank
    std::uint64_t weight_bytes = 0;        // per rank (text weights / tp)
    std::int64_t cache_bytes = 0;          // per rank, usable - weights (negative: weights do not fit)
    std::int64_t tokens_per_sequence = 0;  // context rounded up to whole 128-token pages
    std::uint64_t bytes_per_sequence = 0;  // per rank
    std::int64_t max_sequences = 0;        // 0 when the weights alone do not fit
    std::int64_t max_cached_tokens = 0;    // per rank cache / bytes per token
};

inline constexpr std::int64_t kKvPageTokens = 128;

CapacityPlan plan_capacity(const ModelConfig& config, std::uint64_t text_weight_bytes, KvCacheDtype dtype,
                           const CapacityRequest& request);

}  // namespace msa
