// OpenAI response objects (api.md section 3): chat.completion and its stream chunks, text_completion and its
// chunks, usage with prompt_tokens_details.cached_tokens, logprobs in both OpenAI shapes, and /v1/models.
// Builders only shape JSON; what goes into a choice is decided by the output processing (choice_output.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server {

// Which field names carry reasoning text: SGLang/llama.cpp clients read `reasoning_content`, vLLM's `reasoning`.
enum class ReasoningFields { both, reasoning_content, reasoning };
// Parses "both", "reasoning_content" or "reasoning"; throws msa::Error otherwise.
ReasoningFields parse_reasoning_fields(std::string_view name);

struct Usage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
    std::int64_t cached_tokens = 0;                 // prompt tokens served from the prefix cache
    std::optional<std::int64_t> reasoning_tokens;   // set when a reasoning parser ran
    nlohmann::json to_json() const;
    Usage& operator+=(const Usage& other);
};

struct TopLogprob {
    std::string token;  // the token's bytes (may be a partial UTF-8 sequence)
    double logprob = 0.0;
};

struct TokenLogprob {
    std::string token;
    double logprob = 0.0;
    std::vector<TopLogprob> top;  // most likely alternatives, best first
};

// Chat: the array under logprobs.content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}].
nlohmann::json chat_logprobs_content(const std::vector<TokenLogprob>& tokens);
// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}; offsets count characters
// from `text_offset_start` (the length of text already in the choice, e.g. an echoed prompt).
nlohmann::json completion_logprobs(const std::vector<TokenLogprob>& tokens, std::int64_t text_offset_start);

struct ToolCallResult {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text
};

// One piece of a streamed tool call (OpenAI delta.tool_calls[]): the first piece of a call carries id and name.
struct ToolCallFragment {
    int index = 0;
    bool first = false;
    std::string id;
    std::string name;
    std::string arguments;
};

struct ChatDelta {
    std::string content;
    std::string reasoning;
    std::vector<ToolCallFragment> tool_calls;
    std::vector<TokenLogprob> logprobs;
    std::vector<std::int32_t> token_ids;  // only with return_token_ids
    bool has_logprobs = false;            // the request asked for logprobs (an empty list is still sent)
    bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty() && logprobs.empty(); }
};

struct ChatChoice {
    int index = 0;
    std::string content;
    std::optional<std::string> reasoning;  // set when a reasoning parser saw reasoning
    std::vector<ToolCallResult> tool_calls;
    std::string finish_reason = "stop";
    nlohmann::json stop_reason = nullptr;  // the stop string or token id that ended generation (vLLM extension)
    std::optional<std::vector<TokenLogprob>> logprobs;
    std::optional<std::vector<std::int32_t>> token_ids;
};

class ChatResponseBuilder {
public:
    ChatResponseBuilder(std::string id, std::int64_t created, std::string model, ReasoningFields fields)
        : id_(std::move(id)), created_(created), model_(std::move(model)), fields_(fields) {}

    const std::string& id() const { return id_; }

    nlohmann::json response(const std::vector<ChatChoice>& choices, const Usage& usage,
                            const std::optional<std::vector<std::int32_t>>& prompt_token_ids = std::nullopt) const;
    // The first chunk of a choice: delta {"role": "assistant", "content": ""}.
    nlohmann::json role_chunk(int index) const;
    nlohmann::json delta_chunk(int index, const ChatDelta& delta) const;
    // The last chunk of a choice: an empty delta with the finish reason.
    nlohmann::json finish_chunk(int index, std::string_view finish_reason, const nlohmann::json& stop_reason) const;
    // stream_options.include_usage: {"choices": [], "usage": {...}} after every choice finished.
    nlohmann::json usage_chunk(const Usage& usage) const;

private:
    nlohmann::json chunk(nlohmann::json choices) const;
    void put_reasoning(nlohmann::json& target, const std::string& text) const;

    std::string id_;
    std::int64_t created_;
    std::string model_;
    ReasoningFields fields_;
};

struct CompletionChoice {
    int index = 0;
    std::string text;
    std::string finish_reason = "stop";
    nlohmann::json stop_reason = nullptr;
    nlohmann::json logprobs = nullptr;  // completion_logprobs(...) or null
    std::optional<std::vector<std::int32_t>> token_ids;
};

class CompletionResponseBuilder {
public:
    CompletionResponseBuilder(std::string id, std::int64_t created, std::string model)
        : id_(std::move(id)), created_(created), model_(std::move(model)) {}

    const std::string& id() const { return id_; }

    nlohmann::json response(const std::vector<CompletionChoice>& choices, const Usage& usage) const;
    // A stream chunk for one choice; finish_reason null until the choice's last chunk.
    nlohmann::json chunk(int index, std::string_view text, const nlohmann::json& logprobs,
                         const std::optional<std::string>& finish_reason,
                         const nlohmann::json& stop_reason = nullptr) const;
    nlohmann::json usage_chunk(const Usage& usage) const;

private:
    std::string id_;
    std::int64_t created_;
    std::string model_;
};

struct ModelCard {
    std::string id;
    std::int64_t created = 0;
    std::string owned_by = "msa";
    std::string root;             // the model directory or checkpoint name
    std::int64_t max_model_len = 0;
};
// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by", ...}]}
nlohmann::json models_list(const std::vector<ModelCard>& models);

// Seconds since the epoch, for `created`.
std::int64_t unix_time_now();

}  // namespace msa::server
