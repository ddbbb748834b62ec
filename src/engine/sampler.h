// Next-token sampling with vLLM/OpenAI semantics. The order of operations follows vLLM's v1 sampler:
//   raw logits -> (raw logprobs) -> min_tokens mask of EOS/stop ids -> logit_bias -> repetition penalty ->
//   frequency/presence penalties -> greedy arg max, or temperature -> min-p -> top-k -> top-p -> draw.
// Randomness comes from the request's counter-based RequestRng at the sequence's output position, so a seeded
// request gives the same tokens whatever else is batched with it.
#pragma once

#include "engine/request_rng.h"
#include "engine/sampling_params.h"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace msa {

struct TokenLogprob {
    std::int32_t token = 0;
    float logprob = 0.0f;
};

struct SampledToken {
    std::int32_t token = -1;
    // Filled only when the request asked for logprobs (see LogprobsMode for which distribution).
    float logprob = 0.0f;
    std::vector<TokenLogprob> top_logprobs;  // the `logprobs` most likely tokens, best first (finite ones only)
};

// What penalties look at: the distinct prompt tokens (kept only when a repetition penalty needs them) and the
// count of every generated token.
class TokenHistory {
public:
    TokenHistory() = default;
    TokenHistory(std::span<const std::int32_t> prompt, bool keep_prompt_set);

    void add_output(std::int32_t token);
    // Forgets the last `count` generated tokens (speculative tokens that were rejected).
    void remove_outputs(std::span<const std::int32_t> tokens);
    std::int32_t num_output() const { return num_output_; }
    const std::unordered_map<std::int32_t, std::int32_t>& output_counts() const { return output_counts_; }
    bool prompt_contains(std::int32_t token) const;
    std::span<const std::int32_t> prompt_set() const { return prompt_set_; }

private:
    std::vector<std::int32_t> prompt_set_;  // sorted, unique
    std::unordered_map<std::int32_t, std::int32_t> output_counts_;
    std::int32_t num_output_ = 0;
};

struct SamplerConfig {
    std::int32_t vocab_size = 0;
    std::vector<std::int32_t> eos_token_ids;  // masked before min_tokens; end generation unless ignore_eos
    LogprobsMode logprobs_mode = LogprobsMode::raw;
};

// Not thread-safe: owns scratch buffers; the engine thread has one.
class Sampler {
public:
    explicit Sampler(SamplerConfig config);

    const SamplerConfig& config() const { return config_; }

    // Samples the token at output position `position` from `logits` (vocab_size raw floats of the model).
    SampledToken sample(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                        const RequestRng& rng, std::uint64_t position);

    // The logprobs sample() would report had it drawn `token` (speculative decoding emits tokens it did not
    // sample itself).
    SampledToken describe(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                          std::int32_t token);

    // The distribution sample() draws from, as dense probabilities over the vocabulary (one-hot for greedy).
    // Speculative verification uses it as the target distribution p.
    void probabilities(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                       std::vector<float>& probs);

    // Draws an index from unnormalised non-negative weights with a uniform u in [0, 1) (inverse CDF in index
    // order). Returns the last positive weight's index if rounding leaves u past the total.
    static std::int32_t draw(std::span<const float> weights, double u);

private:
    // Copies logits into work_ (NaN -> -inf) and applies min_tokens masking, logit bias and penalties.
    void process_logits(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history);
    // From work_: fills cand_ids_/cand_weights_ with the tokens kept by temperature, min-p, top-k and top-p
    // (weights unnormalised, relative to the max logit); returns their total weight.
    double build_candidates(const SamplingParams& params);
    // Shrinks cand_ids_ to its best members by (logit desc, id asc): the `limit` best ones (by_mass false, with
    // score = the logits), or the fewest best ones whose weights sum to at least `limit` (by_mass true, with
    // score = token_weight_; nucleus sampling). `score` must be monotone in the logit.
    void keep_best(const float* score, bool by_mass, double limit);
    void fill_logprobs(std::span<const float> raw_logits, const SamplingParams& params, double total,
                       SampledToken& out);

    SamplerConfig config_;
    std::vector<float> work_;
    std::vector<float> raw_;
    std::vector<float> token_weight_;  // exp((l - max) / T) of the candidates, by token id
    std::vector<std::int32_t> bucket_count_;
    std::vector<double> bucket_mass_;
    std::vector<std::int32_t> cand_ids_;
    std::vector<float> cand_weights_;
    std::vector<std::int32_t> order_;
};

// Index of the largest value, ties to the lowest index (greedy decoding). NaN entries are never chosen unless
// every entry is NaN (then 0).
std::int32_t argmax(std::span<const float> values);
// The largest value (NaN entries ignored; -inf when there is none).
float max_value(std::span<const float> values);

}  // namespace msa
