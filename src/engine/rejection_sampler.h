// Verification of speculative draft tokens against the target model, lossless in distribution: the emitted tokens
// are distributed exactly as if sampled one at a time from the target (Leviathan et al. 2023, Chen et al. 2023).
//   For draft i (token x_i drawn from q_i): accept with probability min(1, p_i(x_i) / q_i(x_i)); on the first
//   rejection emit a token drawn from norm(max(0, p_i - q_i)) and stop; if all k are accepted, emit a bonus token
//   drawn from p_k.
// A greedy drafter is the special case q_i = one-hot(x_i) (vLLM's draft_sample_method=greedy).
#pragma once

#include "engine/request_rng.h"

#include <cstdint>
#include <span>
#include <vector>

namespace msa {

struct VerifyResult {
    // The accepted drafts followed by exactly one more token (the correction after a rejection, or the bonus).
    std::vector<std::int32_t> tokens;
    std::int32_t num_accepted = 0;  // accepted drafts: tokens.size() - 1
};

// Greedy target (temperature 0): accept drafts while each equals the arg max of the target row; the token after is
// that row's arg max. target_logits: (k + 1) rows of vocab_size.
VerifyResult verify_greedy(std::span<const std::int32_t> drafts, std::span<const float> target_logits,
                           std::int32_t vocab_size);

// Sampling target. target_probs: (k + 1) rows of the target distribution p (each row sums to 1), the last row for
// the bonus token. draft_probs: k rows of the draft distribution q the drafts were sampled from, or empty when the
// drafter was greedy (q one-hot). Random draws use the request's rng at output positions
// first_position + i (draw 1 for the acceptance test, draw 2 for the residual, draw 0 for the bonus, which is the
// draw ordinary sampling uses).
VerifyResult verify_probabilistic(std::span<const std::int32_t> drafts, std::span<const float> target_probs,
                                  std::span<const float> draft_probs, std::int32_t vocab_size, const RequestRng& rng,
                                  std::uint64_t first_position);

}  // namespace msa
