// The contract between the engine (which schedules sequences and owns page allocation) and a model (which runs
// the forward pass and reads/writes the KV cache pages it is given). Neither side looks inside the other.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace msa {

// One sequence's share of a forward step: a prefill chunk, a decode token, or 1 + drafts for speculative verify.
struct SequenceStep {
    // New tokens, placed at positions [past_len, past_len + tokens.size()).
    std::span<const std::int32_t> tokens;
    // Tokens of this sequence already in the KV cache (their K/V/index-K were written by earlier steps or are
    // shared prefix pages).
    std::int32_t past_len = 0;
    // Physical KV page of each logical 128-token block of the sequence; must cover past_len + tokens.size().
    // The model writes the new tokens' K/V/index-K into these pages (insert first, then attend).
    std::span<const std::int32_t> pages;
    // Logits are wanted for the last `num_logits` new tokens (0 .. tokens.size()): 1 for ordinary decode and for
    // the last prefill chunk, 1 + drafts for speculative verification, 0 for a non-final prefill chunk.
    std::int32_t num_logits = 0;
};

struct ForwardBatch {
    std::vector<SequenceStep> seqs;
};

struct ForwardOutput {
    // Row-major [sum over seqs of num_logits][vocab_size], in batch order.
    std::vector<float> logits;
    // Optional hidden-state taps for a drafter: for each requested layer, the residual stream after that layer
    // for every new token, [num_taps][total_new_tokens][hidden]. Filled only when ForwardOptions asks for it.
    std::vector<float> hidden_taps;
};

struct ForwardOptions {
    // Layer indices whose output residual stream is copied into ForwardOutput::hidden_taps (DSpark conditioning).
    std::vector<int> tap_layers;
};

}  // namespace msa
