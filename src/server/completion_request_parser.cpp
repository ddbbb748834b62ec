// parse_completion_request (/v1/completions) and the /tokenize and /detokenize request parsers.
#include "server/openai_request.h"
#include "server/request_common_parser.h"

#include <fmt/format.h>

#include <limits>

namespace msa::server {

namespace {

constexpr std::int64_t kMaxTokenId = std::numeric_limits<std::int32_t>::max();

std::vector<std::int64_t> parse_id_array(const nlohmann::json& array, const std::string& path) {
    std::vector<std::int64_t> ids;
    ids.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) {
        ids.push_back(json_to_integer(array[i], fmt::format("{}[{}]", path, i), 0, kMaxTokenId));
    }
    return ids;
}

// prompt: a string, a list of strings, a list of token ids, or a list of lists of token ids.
std::vector<CompletionPrompt> parse_prompts(const JsonFields& f) {
    const auto* value = f.find("prompt");
    if (value == nullptr) throw invalid_request("prompt", "Missing required parameter: 'prompt'.");
    std::vector<CompletionPrompt> prompts;
    if (value->is_string()) {
        prompts.push_back({value->get<std::string>(), {}});
        return prompts;
    }
    if (!value->is_array()) {
        f.wrong_type("prompt", "a string, an array of strings or an array of token ids", *value);
    }
    if (value->empty()) throw invalid_request("prompt", "'prompt' must not be empty.");
    const auto& first = value->front();
    if (first.is_number()) {
        prompts.push_back({std::nullopt, parse_id_array(*value, "prompt")});
        return prompts;
    }
    for (std::size_t i = 0; i < value->size(); ++i) {
        const auto& item = (*value)[i];
        const std::string path = fmt::format("prompt[{}]", i);
        if (item.is_string()) {
            prompts.push_back({item.get<std::string>(), {}});
        } else if (item.is_array()) {
            if (item.empty()) throw invalid_request(path, fmt::format("'{}' must not be empty.", path));
            prompts.push_back({std::nullopt, parse_id_array(item, path)});
        } else {
            throw invalid_request(path, fmt::format("Invalid type for '{}': expected a string or an array of token "
                                                    "ids, but got {}.",
                                                    path, json_type_name(item)));
        }
    }
    return prompts;
}

}  // namespace

CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits) {
    const JsonFields f(body, "");
    reject_unimplemented_fields(f, Endpoint::completion);
    CompletionRequest r;
    r.model = f.string("model").value_or("");
    r.prompts = parse_prompts(f);
    r.sampling = parse_sampling_options(f, limits, Endpoint::completion);
    if (!r.sampling.max_tokens) r.sampling.max_tokens = 16;  // OpenAI's default for completions
    if (r.sampling.min_tokens > *r.sampling.max_tokens) {
        throw invalid_request("min_tokens", fmt::format("'min_tokens' ({}) must not exceed 'max_tokens' ({}).",
                                                        r.sampling.min_tokens, *r.sampling.max_tokens));
    }
    r.n = parse_n(f, limits);
    if (const auto best_of = f.integer("best_of", 1, limits.max_n); best_of && *best_of != r.n) {
        throw unsupported_parameter("best_of", "'best_of' different from 'n' is not supported.");
    }
    if (static_cast<std::int64_t>(r.prompts.size()) * r.n > limits.max_n) {
        throw invalid_request("n", fmt::format("{} prompts with n={} ask for {} choices; at most {} are allowed.",
                                               r.prompts.size(), r.n, r.prompts.size() * r.n, limits.max_n));
    }
    r.echo = f.boolean("echo").value_or(false);
    if (r.echo && r.sampling.logprobs) {
        throw unsupported_parameter("echo", "'echo' together with 'logprobs' needs prompt logprobs, which are not "
                                            "supported.");
    }
    r.stream = f.boolean("stream").value_or(false);
    r.stream_options = parse_stream_options(f, r.stream);
    r.return_token_ids = f.boolean("return_token_ids").value_or(false);
    r.request_id = f.string("request_id").value_or("");
    return r;
}

TokenizeRequest parse_tokenize_request(const nlohmann::json& body, const RequestLimits& limits) {
    const JsonFields f(body, "");
    TokenizeRequest r;
    r.model = f.string("model").value_or("");
    const bool has_prompt = f.has("prompt");
    const bool has_messages = f.has("messages");
    if (has_prompt == has_messages) {
        throw invalid_request(has_prompt ? "messages" : "prompt",
                              "Exactly one of 'prompt' and 'messages' must be given.");
    }
    if (has_prompt) {
        r.prompt = f.required_string("prompt");
        r.add_special_tokens = f.boolean("add_special_tokens").value_or(true);
    } else {
        r.chat = parse_chat_completion_request(body, limits);
        r.add_special_tokens = f.boolean("add_special_tokens").value_or(false);
    }
    r.return_token_strs = f.boolean("return_token_strs").value_or(false);
    return r;
}

DetokenizeRequest parse_detokenize_request(const nlohmann::json& body) {
    const JsonFields f(body, "");
    DetokenizeRequest r;
    r.model = f.string("model").value_or("");
    const auto* tokens = f.array("tokens");
    if (tokens == nullptr) throw invalid_request("tokens", "Missing required parameter: 'tokens'.");
    r.tokens = parse_id_array(*tokens, "tokens");
    return r;
}

}  // namespace msa::server
