// What the engine needs from a model: run one ForwardBatch (model/forward_batch.h) over the KV pages the engine
// assigned, and say how big its vocabulary and KV page pool are. The CPU model, the CUDA model and the tests' fake
// model implement it. forward() is only ever called from the engine thread, one step at a time.
#pragma once

#include "model/forward_batch.h"

#include <cstdint>

namespace msa {

class ModelExecutor {
public:
    virtual ~ModelExecutor() = default;

    // Runs the batch: writes the new tokens' K/V into the given pages, then fills out.logits with
    // sum(num_logits) rows of vocab_size() floats in batch order. May throw msa::Error; the engine then fails the
    // requests of that step and carries on.
    virtual void forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out) = 0;

    virtual std::int32_t vocab_size() const = 0;
    // Number of KV pages the model allocated; page ids in SequenceStep::pages are in [0, num_kv_pages()).
    virtual std::int32_t num_kv_pages() const = 0;
    // Tokens per KV page (128 for MSA models: a page is one attention block).
    virtual std::int32_t page_size() const { return 128; }
    // Longest sequence (prompt + output) the model supports (from its config).
    virtual std::int32_t max_model_len() const = 0;
};

}  // namespace msa
