// Speculative decoding: a drafter proposes tokens that the target model verifies in one step (1 + k tokens per
// sequence, rejection_sampler.h). The engine asks for drafts before each step for every sequence that is
// decoding; DSpark and n-gram drafters implement this.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace msa {

class Drafter {
public:
    virtual ~Drafter() = default;

    // Proposes up to `max_drafts` tokens to follow `tokens` (the sequence's prompt and generated tokens). When the
    // drafts were sampled from a distribution q, `draft_probs` gets one row of vocab_size probabilities per draft
    // (probabilistic drafting); leaving it empty means greedy drafting (q is one-hot on each draft).
    virtual void propose(std::uint64_t request_id, std::int32_t sample_index, std::span<const std::int32_t> tokens,
                         std::int32_t max_drafts, std::vector<std::int32_t>& drafts,
                         std::vector<float>& draft_probs) = 0;
};

}  // namespace msa
