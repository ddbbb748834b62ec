// The MiniMax-M3 / M3.1 text model (model.md, msa.md): loads a checkpoint directory (config.json + sharded
// safetensors with the real tensor names, weights memory-mapped), owns the paged KV cache, and runs forward steps
// for batches of sequences (forward_batch.h) on a compute backend (the CPU backend by default).
//
// One forward step: embeddings; per layer Gemma RMSNorm, q/k/v (+ index q/k on MSA layers) projections, the
// backend's attention core (per-head norms, partial RoPE, KV insert, dense or MSA attention), o_proj and the
// residual; Gemma RMSNorm, dense MLP or MoE and the residual; finally the last num_logits rows of each sequence
// through the final norm and lm_head. Every token's result depends only on its sequence's tokens and cache,
// never on the rest of the batch.
#pragma once

#include "formats/safetensors_reader.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/checkpoint_weights.h"
#include "model/forward_batch.h"
#include "model/forward_trace.h"
#include "model/model_config.h"
#include "model/model_options.h"
#include "model/model_weights.h"

#include <cstdint>
#include <memory>
#include <string>

namespace msa {

class MiniMaxM3Model {
public:
    // Loads `dir` (config.json and its safetensors). Throws msa::Error naming the file, field or tensor at fault.
    static std::unique_ptr<MiniMaxM3Model> load(const std::string& dir, const ModelOptions& options = {},
                                                std::unique_ptr<Backend> backend = nullptr);

    // Runs one step. Writes the new tokens' K/V/index-K into their pages, fills out.logits with the last
    // num_logits rows of every sequence (batch order) and out.hidden_taps when options.tap_layers asks for them.
    // Throws msa::Error for a malformed batch (token ids, page table too short or out of range, context too long).
    void forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out,
                 ForwardTrace* trace = nullptr);

    std::int32_t vocab_size() const { return config_.vocab_size; }
    std::int32_t num_kv_pages() const { return kv_->num_pages(); }
    std::int32_t page_size() const { return kKvPageTokens; }
    std::int32_t max_model_len() const;

    const ModelConfig& config() const { return config_; }
    const ModelOptions& options() const { return options_; }
    KvCacheDtype kv_dtype() const { return kv_->config().dtype; }
    KvCache& kv_cache() { return *kv_; }
    Backend& backend() { return *backend_; }
    // Bytes of weights one decode token reads (embedding row aside): every dense weight plus top_k routed experts
    // and the shared expert per MoE layer. For bandwidth accounting in benchmarks.
    std::uint64_t weight_bytes_per_token() const;

private:
    MiniMaxM3Model(ModelConfig config, Checkpoint checkpoint, const ModelOptions& options,
                   std::unique_ptr<Backend> backend);

    ModelConfig config_;
    ModelOptions options_;
    Checkpoint checkpoint_;
    CheckpointWeights bound_;
    std::unique_ptr<Backend> backend_;
    ModelWeights weights_;
    std::unique_ptr<BackendBuffer> kv_storage_;
    std::unique_ptr<KvCache> kv_;
};

}  // namespace msa
