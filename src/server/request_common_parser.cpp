#include "server/request_common_parser.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace msa::server {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMaxTokenId = std::numeric_limits<std::int32_t>::max();

std::vector<std::string> parse_stop(const JsonFields& fields, const RequestLimits& limits) {
    std::vector<std::string> stop;
    const auto* value = fields.find("stop");
    if (value == nullptr) return stop;
    const std::string name = fields.path("stop");
    if (value->is_string()) {
        stop.push_back(value->get<std::string>());
    } else if (value->is_array()) {
        for (std::size_t i = 0; i < value->size(); ++i) {
            const auto& item = (*value)[i];
            if (!item.is_string()) {
                throw invalid_request(fmt::format("{}[{}]", name, i),
                                      fmt::format("Invalid type for '{}[{}]': expected a string, but got {}.", name, i,
                                                  json_type_name(item)));
            }
            stop.push_back(item.get<std::string>());
        }
    } else {
        fields.wrong_type("stop", "a string or an array of strings", *value);
    }
    if (static_cast<std::int64_t>(stop.size()) > limits.max_stop_strings) {
        throw invalid_request(name, fmt::format("'{}' has {} strings; at most {} are allowed.", name, stop.size(),
                                                limits.max_stop_strings));
    }
    for (const auto& s : stop) {
        if (s.empty()) throw invalid_request(name, fmt::format("'{}' must not contain empty strings.", name));
    }
    return stop;
}

std::vector<std::int64_t> parse_token_id_list(const JsonFields& fields, std::string_view key) {
    std::vector<std::int64_t> ids;
    const auto* value = fields.array(key);
    if (value == nullptr) return ids;
    const std::string name = fields.path(key);
    ids.reserve(value->size());
    for (std::size_t i = 0; i < value->size(); ++i) {
        ids.push_back(json_to_integer((*value)[i], fmt::format("{}[{}]", name, i), 0, kMaxTokenId));
    }
    return ids;
}

std::vector<std::pair<std::int64_t, double>> parse_logit_bias(const JsonFields& fields) {
    std::vector<std::pair<std::int64_t, double>> bias;
    const auto object = fields.object("logit_bias");
    if (!object) return bias;
    const auto& json = object->json();
    for (auto it = json.begin(); it != json.end(); ++it) {
        const std::string& key = it.key();
        std::int64_t id = -1;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > kMaxTokenId) {
            throw invalid_request(fields.path("logit_bias"),
                                  fmt::format("'logit_bias' keys must be token ids (non-negative integers); got '{}'.",
                                              key));
        }
        const auto value = object->number(key, -100.0, 100.0);
        if (value) bias.emplace_back(id, *value);
    }
    return bias;
}

}  // namespace

SamplingOptions parse_sampling_options(const JsonFields& f, const RequestLimits& limits, Endpoint endpoint) {
    SamplingOptions s;
    const auto max_tokens = f.integer("max_tokens", 1, kInt64Max);
    const auto max_completion_tokens =
        endpoint == Endpoint::chat ? f.integer("max_completion_tokens", 1, kInt64Max) : std::nullopt;
    s.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
    s.temperature = f.number("temperature", 0.0, 2.0);
    s.top_p = f.number("top_p", 0.0, 1.0);
    if (s.top_p && *s.top_p <= 0.0) {
        throw invalid_request("top_p", fmt::format("'top_p' must be greater than 0 and at most 1; got {}.", *s.top_p));
    }
    s.top_k = f.integer("top_k", -1, kMaxTokenId);
    s.min_p = f.number("min_p", 0.0, 1.0);
    s.presence_penalty = f.number("presence_penalty", -2.0, 2.0);
    s.frequency_penalty = f.number("frequency_penalty", -2.0, 2.0);
    s.repetition_penalty = f.number("repetition_penalty", 0.0, std::numeric_limits<double>::infinity());
    if (s.repetition_penalty && *s.repetition_penalty <= 0.0) {
        throw invalid_request("repetition_penalty",
                              fmt::format("'repetition_penalty' must be greater than 0; got {}.", *s.repetition_penalty));
    }
    if (const auto seed = f.integer("seed", kInt64Min, kInt64Max)) s.seed = static_cast<std::uint64_t>(*seed);
    s.logit_bias = parse_logit_bias(f);
    s.stop = parse_stop(f, limits);
    s.stop_token_ids = parse_token_id_list(f, "stop_token_ids");
    s.include_stop_str_in_output = f.boolean("include_stop_str_in_output").value_or(false);
    s.ignore_eos = f.boolean("ignore_eos").value_or(false);
    s.min_tokens = f.integer("min_tokens", 0, kInt64Max).value_or(0);
    if (s.max_tokens && s.min_tokens > *s.max_tokens) {
        throw invalid_request("min_tokens", fmt::format("'min_tokens' ({}) must not exceed the maximum number of "
                                                        "tokens to generate ({}).",
                                                        s.min_tokens, *s.max_tokens));
    }
    s.skip_special_tokens = f.boolean("skip_special_tokens").value_or(true);
    s.cache_salt = f.string("cache_salt").value_or("");

    if (endpoint == Endpoint::chat) {
        const bool logprobs = f.boolean("logprobs").value_or(false);
        const auto top = f.integer("top_logprobs", 0, limits.max_top_logprobs);
        if (top && !logprobs) {
            throw invalid_request("top_logprobs", "'top_logprobs' requires 'logprobs' to be true.");
        }
        if (logprobs) s.logprobs = top.value_or(0);
    } else {
        s.logprobs = f.integer("logprobs", 0, limits.max_top_logprobs);
    }
    return s;
}

StreamOptions parse_stream_options(const JsonFields& f, bool stream) {
    StreamOptions options;
    const auto object = f.object("stream_options");
    if (!object) return options;
    if (!stream) {
        throw invalid_request("stream_options", "'stream_options' is only allowed when 'stream' is true.");
    }
    options.include_usage = object->boolean("include_usage").value_or(false);
    options.continuous_usage_stats = object->boolean("continuous_usage_stats").value_or(false);
    return options;
}

std::int64_t parse_n(const JsonFields& f, const RequestLimits& limits) {
    return f.integer("n", 1, limits.max_n).value_or(1);
}

namespace {

// A recognised field whose value asks for something we do not implement.
struct Unimplemented {
    const char* name;
    const char* why;
    bool chat_only = false;
    bool completion_only = false;
};

bool is_default_value(const nlohmann::json& value) {
    if (value.is_boolean()) return !value.get<bool>();
    if (value.is_number()) return value.get<double>() == 0.0;
    if (value.is_string()) return value.get<std::string>().empty();
    if (value.is_array() || value.is_object()) return value.empty();
    return value.is_null();
}

constexpr Unimplemented kUnimplemented[] = {
    {"functions", "the deprecated 'functions' API is not supported; use 'tools'"},
    {"function_call", "the deprecated 'function_call' API is not supported; use 'tool_choice'"},
    {"audio", "audio output is not supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"use_beam_search", "beam search is not supported"},
    {"prompt_logprobs", "prompt logprobs are not supported"},
    {"guided_json", "guided decoding is not supported"},
    {"guided_regex", "guided decoding is not supported"},
    {"guided_choice", "guided decoding is not supported"},
    {"guided_grammar", "guided decoding is not supported"},
    {"structured_outputs", "structured outputs are not supported"},
    {"thinking_token_budget", "a reasoning token budget is not supported"},
    {"truncate_prompt_tokens", "prompt truncation is not supported"},
    {"chat_template", "per-request chat templates are not accepted", true},
    {"documents", "documents for retrieval-augmented templates are not supported", true},
    {"priority", "priority scheduling is not enabled"},
    {"allowed_token_ids", "allowed_token_ids is not supported"},
    {"bad_words", "bad_words is not supported"},
    {"logprob_token_ids", "logprob_token_ids is not supported"},
    {"return_tokens_as_token_ids", "return_tokens_as_token_ids is not supported"},
    {"repetition_detection", "repetition detection is not supported"},
    {"kv_transfer_params", "KV transfer is not supported"},
    {"store", "stored completions are not supported"},
    {"echo", "echo is only supported on /v1/completions", true},
    {"suffix", "suffix (fill-in-the-middle) is not supported", false, true},
};

}  // namespace

void reject_unimplemented_fields(const JsonFields& f, Endpoint endpoint) {
    for (const auto& field : kUnimplemented) {
        if (field.chat_only && endpoint != Endpoint::chat) continue;
        if (field.completion_only && endpoint != Endpoint::completion) continue;
        const auto* value = f.find(field.name);
        if (value != nullptr && !is_default_value(*value)) {
            throw unsupported_parameter(field.name, fmt::format("'{}': {}.", field.name, field.why));
        }
    }
    if (const auto* value = f.find("length_penalty"); value != nullptr && !(value->is_number() && *value == 1.0)) {
        throw unsupported_parameter("length_penalty", "'length_penalty' only applies to beam search, which is not "
                                                      "supported.");
    }
    if (const auto* value = f.find("modalities"); value != nullptr) {
        if (!value->is_array()) f.wrong_type("modalities", "an array", *value);
        for (const auto& m : *value) {
            if (m != "text") {
                throw unsupported_parameter("modalities", "Only the 'text' output modality is supported.");
            }
        }
    }
}

}  // namespace msa::server
