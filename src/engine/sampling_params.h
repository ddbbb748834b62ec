// The per-request generation parameters the engine honours (api.md section 2), with vLLM/OpenAI semantics.
// The server fills this from the JSON request (and generation_config.json defaults); validate() rejects values
// that are out of range with a RequestError naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace msa {

// Which distribution logprobs are taken from.
enum class LogprobsMode {
    raw,        // log-softmax of the model's logits before any processing (vLLM's default, "raw_logprobs")
    processed,  // log of the distribution actually sampled from: after logit bias, penalties, temperature,
                // min-p, top-k and top-p (tokens those filters removed get -inf)
};

struct SamplingParams {
    // Logits are divided by the temperature; 0 (or anything below 1e-5, as in vLLM) means greedy: the arg max
    // of the logits after bias and penalties, ties to the lowest token id.
    float temperature = 1.0f;
    // Nucleus sampling: keep the smallest set of most probable tokens whose mass reaches top_p (1 = off).
    float top_p = 1.0f;
    // Keep the k most probable tokens (ties broken to the lower id); 0 or -1 = off.
    std::int32_t top_k = 0;
    // Drop tokens whose probability is below min_p times the most probable token's (0 = off).
    float min_p = 0.0f;
    // OpenAI penalties over the generated tokens only (vLLM semantics): logit -= frequency_penalty * count
    // + presence_penalty * (count > 0). Range [-2, 2].
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    // HF/vLLM repetition penalty over prompt and generated tokens: a positive logit is divided by it, a negative
    // one multiplied. 1 = off; must be > 0.
    float repetition_penalty = 1.0f;
    // Added to the logits before penalties (OpenAI logit_bias, values in [-100, 100]).
    std::vector<std::pair<std::int32_t, float>> logit_bias;
    // Same seed, same output, whatever else is in the batch. Unset: the engine draws a random seed.
    std::optional<std::uint64_t> seed;
    // Generation stops when one of these strings appears in the output text (matched across token boundaries);
    // the string is cut from the text unless include_stop_str_in_output.
    std::vector<std::string> stop;
    // Generation stops after one of these tokens (their text is not part of the output).
    std::vector<std::int32_t> stop_token_ids;
    bool include_stop_str_in_output = false;
    // Keep generating past the model's EOS token(s).
    bool ignore_eos = false;
    // Upper bound on generated tokens; unset: until max_model_len.
    std::optional<std::int32_t> max_tokens;
    // No stop token, EOS or stop string ends generation before this many tokens (EOS and stop ids are masked).
    std::int32_t min_tokens = 0;
    // Unset: no logprobs. k >= 0: the sampled token's logprob plus the k most likely alternatives.
    std::optional<std::int32_t> logprobs;
    // Special tokens (per the tokenizer) contribute no text.
    bool skip_special_tokens = true;

    bool greedy() const { return temperature < 1e-5f; }
};

// Largest `logprobs` value accepted (OpenAI allows top_logprobs up to 20).
inline constexpr std::int32_t kMaxLogprobs = 20;

// Throws RequestError(invalid_request) naming the offending field when a value is out of range or a token id is
// not in [0, vocab_size).
void validate_sampling_params(const SamplingParams& params, std::int32_t vocab_size);

}  // namespace msa
