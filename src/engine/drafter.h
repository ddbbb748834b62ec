// Speculative decoding: a drafter proposes tokens that the target model verifies in one step (1 + k tokens per
// sequence, rejection_sampler.h). The engine asks for drafts before each step for every sequence that is
// decoding; DSpark (dspark_drafter.h) and n-gram drafters implement this.
//
// A drafter that conditions on the target's hidden states (DSpark) names the target layers it wants in
// tap_layers(); the engine then asks the model for those taps on every step and hands each sequence's rows to
// observe() after the step, so the drafter can keep its own per-sequence context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace msa {

class Drafter {
public:
    virtual ~Drafter() = default;

    // Target layers whose residual stream (after the layer) the drafter conditions on; empty: none.
    virtual std::vector<int> tap_layers() const { return {}; }

    // After every target step, for each sequence in it: the tokens computed at positions
    // [first_position, first_position + tokens.size()) and their taps, row-major
    // [tokens.size()][num_taps * hidden] (a row is tap 0's hidden state, then tap 1's, ... in tap_layers() order).
    // Prefill chunks and verify steps alike; positions seen before (preemption by recompute, rejected drafts) are
    // replaced. Positions served from the prefix cache are never observed.
    virtual void observe(std::uint64_t /*request_id*/, std::int32_t /*sample_index*/, std::int32_t /*first_position*/,
                         std::span<const std::int32_t> /*tokens*/, std::span<const float> /*taps*/) {}

    // The request finished or was aborted: drop what the drafter keeps for it.
    virtual void release(std::uint64_t /*request_id*/) {}

    // Proposes up to `max_drafts` tokens to follow `tokens` (the sequence's prompt and generated tokens). The
    // context is positions [0, tokens.size() - 1); tokens.back() is the anchor, not yet computed by the target, so
    // anything observed at positions >= tokens.size() - 1 belongs to rejected drafts. When the drafts were sampled
    // from a distribution q, `draft_probs` gets one row of vocab_size probabilities per draft (probabilistic
    // drafting); leaving it empty means greedy drafting (q is one-hot on each draft).
    virtual void propose(std::uint64_t request_id, std::int32_t sample_index, std::span<const std::int32_t> tokens,
                         std::int32_t max_drafts, std::vector<std::int32_t>& drafts,
                         std::vector<float>& draft_probs) = 0;
};

}  // namespace msa
