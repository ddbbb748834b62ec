#include "engine/rejection_sampler.h"

#include "core/error.h"
#include "engine/sampler.h"

#include <algorithm>

namespace msa {

namespace {

void check_rows(std::span<const float> rows, std::size_t count, std::int32_t vocab_size, const char* what) {
    MSA_CHECK(rows.size() == count * static_cast<std::size_t>(vocab_size),
              "speculative verification: {} has {} values, expected {} rows of {}.", what, rows.size(), count,
              vocab_size);
}

}  // namespace

VerifyResult verify_greedy(std::span<const std::int32_t> drafts, std::span<const float> target_logits,
                           std::int32_t vocab_size) {
    const std::size_t k = drafts.size();
    check_rows(target_logits, k + 1, vocab_size, "target_logits");
    VerifyResult result;
    for (std::size_t i = 0; i <= k; ++i) {
        const std::int32_t best = argmax(target_logits.subspan(i * vocab_size, vocab_size));
        result.tokens.push_back(best);
        if (i == k || best != drafts[i]) break;
        ++result.num_accepted;
    }
    return result;
}

VerifyResult verify_probabilistic(std::span<const std::int32_t> drafts, std::span<const float> target_probs,
                                  std::span<const float> draft_probs, std::int32_t vocab_size, const RequestRng& rng,
                                  std::uint64_t first_position) {
    const std::size_t k = drafts.size();
    check_rows(target_probs, k + 1, vocab_size, "target_probs");
    const bool greedy_draft = draft_probs.empty();
    if (!greedy_draft) check_rows(draft_probs, k, vocab_size, "draft_probs");

    VerifyResult result;
    std::vector<float> residual(vocab_size);
    for (std::size_t i = 0; i < k; ++i) {
        const std::int32_t x = drafts[i];
        MSA_CHECK(x >= 0 && x < vocab_size, "speculative verification: draft token {} is outside the vocabulary.", x);
        auto p = target_probs.subspan(i * vocab_size, vocab_size);
        const double q_x = greedy_draft ? 1.0 : draft_probs[i * vocab_size + x];
        // Accept with probability min(1, p/q): u * q < p (so q == 0 accepts any token the target allows).
        if (rng.uniform(first_position + i, 1) * q_x < p[x]) {
            result.tokens.push_back(x);
            ++result.num_accepted;
            continue;
        }
        double mass = 0.0;
        for (std::int32_t t = 0; t < vocab_size; ++t) {
            const float q_t = greedy_draft ? (t == x ? 1.0f : 0.0f) : draft_probs[i * vocab_size + t];
            residual[t] = std::max(0.0f, p[t] - q_t);
            mass += residual[t];
        }
        // A rejection has probability sum(max(0, q - p)) = sum(max(0, p - q)); a zero residual only happens through
        // rounding, when p and q agree, and then p itself is the right distribution.
        auto weights = mass > 0.0 ? std::span<const float>(residual) : p;
        result.tokens.push_back(Sampler::draw(weights, rng.uniform(first_position + i, 2)));
        return result;
    }
    result.tokens.push_back(
        Sampler::draw(target_probs.subspan(k * vocab_size, vocab_size), rng.uniform(first_position + k, 0)));
    return result;
}

}  // namespace msa
