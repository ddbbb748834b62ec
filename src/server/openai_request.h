// Typed OpenAI requests (api.md section 2): chat completions, completions, /tokenize and /detokenize. The parse_*
// functions validate a JSON body completely before anything is submitted: wrong types and out-of-range values are
// a 400 ApiError naming the field; fields we recognise but do not implement are rejected with a 400
// (code "unsupported_parameter") instead of being silently ignored; unknown fields are ignored (clients send many).
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace msa::server {

// What the serving side can do; the parsers reject requests beyond it.
struct RequestLimits {
    std::int64_t max_n = 128;              // choices per request (n); completions: prompts * n
    std::int64_t max_top_logprobs = 20;    // OpenAI's own limit
    std::int64_t max_stop_strings = 64;
    bool structured_output = false;        // response_format json_object / json_schema (needs constrained decoding)
};

// Sampling and stopping options shared by chat completions and completions. Field names and meanings follow
// OpenAI and vLLM; unset optionals mean "the model's default" (generation_config.json, then the engine's).
struct SamplingOptions {
    std::optional<std::int64_t> max_tokens;  // chat: max_completion_tokens wins over max_tokens
    std::optional<double> temperature;       // [0, 2]
    std::optional<double> top_p;             // (0, 1]
    std::optional<std::int64_t> top_k;       // -1 or 0 = off
    std::optional<double> min_p;             // [0, 1]
    std::optional<double> presence_penalty;  // [-2, 2]
    std::optional<double> frequency_penalty; // [-2, 2]
    std::optional<double> repetition_penalty;// > 0
    std::optional<std::uint64_t> seed;       // any int64, reinterpreted as unsigned
    std::vector<std::pair<std::int64_t, double>> logit_bias;  // token id -> bias in [-100, 100]
    std::vector<std::string> stop;           // non-empty strings
    std::vector<std::int64_t> stop_token_ids;
    bool include_stop_str_in_output = false;
    bool ignore_eos = false;
    std::int64_t min_tokens = 0;
    bool skip_special_tokens = true;
    // Unset: no logprobs. Otherwise the number of alternatives per token (chat: top_logprobs; completions:
    // the integer `logprobs`).
    std::optional<std::int64_t> logprobs;
    std::string cache_salt;                  // prefix-cache isolation between tenants ("" = none)
};

struct StreamOptions {
    bool include_usage = false;              // a final {"choices": [], "usage": ...} chunk
    bool continuous_usage_stats = false;     // usage on every chunk (vLLM extension)
};

struct ToolCallRef {  // a tool call in an assistant message of the history
    std::string id;
    std::string name;
    std::string arguments;                   // the JSON text as the client sent it (a string, as in OpenAI)
    nlohmann::json arguments_json;           // parsed when it was valid JSON (templates iterate over it), else null
};

struct ChatMessage {
    enum class Role { system, developer, user, assistant, tool };
    Role role = Role::user;
    // Text content; list-of-parts content is concatenated (text parts only). Unset: content was null/absent.
    std::optional<std::string> content;
    std::string name;
    std::string tool_call_id;                // role tool
    std::vector<ToolCallRef> tool_calls;     // role assistant
    std::optional<std::string> reasoning;    // role assistant: `reasoning` or `reasoning_content` in history
};
const char* role_name(ChatMessage::Role role);

struct ToolDefinition {
    std::string name;
    std::string description;
    nlohmann::json parameters = nlohmann::json::object();  // JSON schema of the arguments
    bool strict = false;
};

struct ToolChoice {
    enum class Mode { none, auto_, required, named };
    Mode mode = Mode::none;
    std::string name;                        // Mode::named
};

struct ResponseFormat {
    enum class Type { text, json_object, json_schema };
    Type type = Type::text;
    std::string schema_name;
    nlohmann::json schema;                   // json_schema
    bool strict = false;
};

struct ChatCompletionRequest {
    std::string model;                       // "" when absent (the served model is meant)
    std::vector<ChatMessage> messages;
    SamplingOptions sampling;
    std::int64_t n = 1;
    bool logprobs = false;                   // chat: boolean; the count is sampling.logprobs
    bool stream = false;
    StreamOptions stream_options;
    std::vector<ToolDefinition> tools;
    ToolChoice tool_choice;                  // default: auto with tools, none without
    bool parallel_tool_calls = true;
    ResponseFormat response_format;
    std::optional<std::string> reasoning_effort;      // none, minimal, low, medium, high, xhigh
    nlohmann::json chat_template_kwargs = nlohmann::json::object();
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    bool include_reasoning = true;           // false: reasoning is parsed out and dropped
    bool return_token_ids = false;
    std::string request_id;                  // client-chosen id (vLLM `request_id`), "" = generate one
};

// One prompt of a completions request: text or token ids.
struct CompletionPrompt {
    std::optional<std::string> text;
    std::vector<std::int64_t> token_ids;     // used when text is unset
};

struct CompletionRequest {
    std::string model;
    std::vector<CompletionPrompt> prompts;   // a batch of prompts: choice index = prompt * n + i
    SamplingOptions sampling;                // max_tokens defaults to 16 (OpenAI) when unset
    std::int64_t n = 1;
    bool echo = false;
    bool stream = false;
    StreamOptions stream_options;
    bool return_token_ids = false;
    std::string request_id;
};

struct TokenizeRequest {
    std::string model;
    std::optional<std::string> prompt;       // either prompt...
    std::optional<ChatCompletionRequest> chat;  // ...or messages (rendered through the chat template)
    bool add_special_tokens = true;          // default true for prompt, false for messages (vLLM)
    bool return_token_strs = false;
};

struct DetokenizeRequest {
    std::string model;
    std::vector<std::int64_t> tokens;
};

// Each parser validates the whole body; throws ApiError (400) on the first problem found.
ChatCompletionRequest parse_chat_completion_request(const nlohmann::json& body, const RequestLimits& limits);
CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits);
TokenizeRequest parse_tokenize_request(const nlohmann::json& body, const RequestLimits& limits);
DetokenizeRequest parse_detokenize_request(const nlohmann::json& body);

// Parses a request body as JSON; throws ApiError 400 (with the byte offset) on malformed JSON or invalid UTF-8.
nlohmann::json parse_json_body(const std::string& body);

}  // namespace msa::server
