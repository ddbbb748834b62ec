#include "engine/sampling_params.h"

#include "engine/request_error.h"

#include <cmath>

namespace msa {

namespace {

void check_token_id(std::int32_t id, std::int32_t vocab_size, const char* field) {
    if (id < 0 || id >= vocab_size) {
        reject_request(field, "{} contains token id {}, which is outside the vocabulary [0, {}).", field, id,
                       vocab_size);
    }
}

void check_finite(float value, const char* field) {
    if (!std::isfinite(value)) reject_request(field, "{} must be a finite number.", field);
}

}  // namespace

void validate_sampling_params(const SamplingParams& p, std::int32_t vocab_size) {
    check_finite(p.temperature, "temperature");
    if (p.temperature < 0.0f) reject_request("temperature", "temperature must be >= 0, got {}.", p.temperature);
    check_finite(p.top_p, "top_p");
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) reject_request("top_p", "top_p must be in (0, 1], got {}.", p.top_p);
    if (p.top_k < -1) reject_request("top_k", "top_k must be -1, 0 (disabled) or positive, got {}.", p.top_k);
    check_finite(p.min_p, "min_p");
    if (p.min_p < 0.0f || p.min_p > 1.0f) reject_request("min_p", "min_p must be in [0, 1], got {}.", p.min_p);
    check_finite(p.presence_penalty, "presence_penalty");
    if (std::fabs(p.presence_penalty) > 2.0f) {
        reject_request("presence_penalty", "presence_penalty must be in [-2, 2], got {}.", p.presence_penalty);
    }
    check_finite(p.frequency_penalty, "frequency_penalty");
    if (std::fabs(p.frequency_penalty) > 2.0f) {
        reject_request("frequency_penalty", "frequency_penalty must be in [-2, 2], got {}.", p.frequency_penalty);
    }
    check_finite(p.repetition_penalty, "repetition_penalty");
    if (!(p.repetition_penalty > 0.0f) || p.repetition_penalty > 100.0f) {
        reject_request("repetition_penalty", "repetition_penalty must be in (0, 100], got {}.", p.repetition_penalty);
    }
    for (const auto& [token, bias] : p.logit_bias) {
        check_token_id(token, vocab_size, "logit_bias");
        check_finite(bias, "logit_bias");
        if (std::fabs(bias) > 100.0f) {
            reject_request("logit_bias", "logit_bias values must be in [-100, 100], got {} for token {}.", bias, token);
        }
    }
    for (const auto& s : p.stop) {
        if (s.empty()) reject_request("stop", "stop strings must not be empty.");
    }
    for (std::int32_t id : p.stop_token_ids) check_token_id(id, vocab_size, "stop_token_ids");
    if (p.max_tokens && *p.max_tokens < 1) {
        reject_request("max_tokens", "max_tokens must be at least 1, got {}.", *p.max_tokens);
    }
    if (p.min_tokens < 0) reject_request("min_tokens", "min_tokens must be >= 0, got {}.", p.min_tokens);
    if (p.max_tokens && p.min_tokens > *p.max_tokens) {
        reject_request("min_tokens", "min_tokens ({}) must not exceed max_tokens ({}).", p.min_tokens, *p.max_tokens);
    }
    if (p.logprobs && (*p.logprobs < 0 || *p.logprobs > kMaxLogprobs)) {
        reject_request("top_logprobs", "top_logprobs must be in [0, {}], got {}.", kMaxLogprobs, *p.logprobs);
    }
}

}  // namespace msa
