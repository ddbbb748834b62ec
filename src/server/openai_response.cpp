#include "server/openai_response.h"

#include "core/error.h"

#include <chrono>

namespace msa::server {

using nlohmann::json;

ReasoningFields parse_reasoning_fields(std::string_view name) {
    if (name == "both") return ReasoningFields::both;
    if (name == "reasoning_content") return ReasoningFields::reasoning_content;
    if (name == "reasoning") return ReasoningFields::reasoning;
    fail("Unknown reasoning field setting '{}': use both, reasoning_content or reasoning.", name);
}

json Usage::to_json() const {
    json usage = {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens},
                  {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
    if (reasoning_tokens) usage["completion_tokens_details"] = {{"reasoning_tokens", *reasoning_tokens}};
    return usage;
}

Usage& Usage::operator+=(const Usage& other) {
    prompt_tokens += other.prompt_tokens;
    completion_tokens += other.completion_tokens;
    cached_tokens += other.cached_tokens;
    if (other.reasoning_tokens) reasoning_tokens = reasoning_tokens.value_or(0) + *other.reasoning_tokens;
    return *this;
}

namespace {

json token_bytes(const std::string& token) {
    json bytes = json::array();
    for (const unsigned char c : token) bytes.push_back(static_cast<int>(c));
    return bytes;
}

// Characters (code points) in a byte string: every byte that does not continue a UTF-8 sequence starts one.
std::int64_t char_count(const std::string& text) {
    std::int64_t n = 0;
    for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace

json chat_logprobs_content(const std::vector<TokenLogprob>& tokens) {
    json content = json::array();
    for (const auto& t : tokens) {
        json top = json::array();
        for (const auto& alt : t.top) {
            top.push_back({{"token", alt.token}, {"logprob", alt.logprob}, {"bytes", token_bytes(alt.token)}});
        }
        content.push_back(
            {{"token", t.token}, {"logprob", t.logprob}, {"bytes", token_bytes(t.token)}, {"top_logprobs", top}});
    }
    return content;
}

json completion_logprobs(const std::vector<TokenLogprob>& tokens, std::int64_t text_offset_start) {
    json out = {{"tokens", json::array()},
                {"token_logprobs", json::array()},
                {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    std::int64_t offset = text_offset_start;
    for (const auto& t : tokens) {
        out["tokens"].push_back(t.token);
        out["token_logprobs"].push_back(t.logprob);
        // OpenAI's legacy format always includes the sampled token among the top entries.
        json top = json::object();
        top[t.token] = t.logprob;
        for (const auto& alt : t.top) {
            if (!top.contains(alt.token)) top[alt.token] = alt.logprob;
        }
        out["top_logprobs"].push_back(std::move(top));
        out["text_offset"].push_back(offset);
        offset += char_count(t.token);
    }
    return out;
}

void ChatResponseBuilder::put_reasoning(json& target, const std::string& text) const {
    if (fields_ != ReasoningFields::reasoning) target["reasoning_content"] = text;
    if (fields_ != ReasoningFields::reasoning_content) target["reasoning"] = text;
}

json ChatResponseBuilder::response(const std::vector<ChatChoice>& choices, const Usage& usage,
                                   const std::optional<std::vector<std::int32_t>>& prompt_token_ids) const {
    json out_choices = json::array();
    for (const auto& c : choices) {
        json message = {{"role", "assistant"}};
        // OpenAI sends null content when the turn is only tool calls.
        message["content"] = c.content.empty() && !c.tool_calls.empty() ? json(nullptr) : json(c.content);
        if (c.reasoning) put_reasoning(message, *c.reasoning);
        if (!c.tool_calls.empty()) {
            json calls = json::array();
            for (const auto& call : c.tool_calls) {
                calls.push_back({{"id", call.id},
                                 {"type", "function"},
                                 {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
            }
            message["tool_calls"] = std::move(calls);
        }
        json choice = {{"index", c.index},
                       {"message", std::move(message)},
                       {"logprobs", nullptr},
                       {"finish_reason", c.finish_reason},
                       {"stop_reason", c.stop_reason}};
        if (c.logprobs) choice["logprobs"] = {{"content", chat_logprobs_content(*c.logprobs)}};
        if (c.token_ids) choice["token_ids"] = *c.token_ids;
        out_choices.push_back(std::move(choice));
    }
    json out = {{"id", id_},
                {"object", "chat.completion"},
                {"created", created_},
                {"model", model_},
                {"choices", std::move(out_choices)},
                {"usage", usage.to_json()}};
    if (prompt_token_ids) out["prompt_token_ids"] = *prompt_token_ids;
    return out;
}

json ChatResponseBuilder::chunk(json choices) const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", model_},
            {"choices", std::move(choices)}};
}

json ChatResponseBuilder::role_chunk(int index) const {
    return chunk(json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}}));
}

json ChatResponseBuilder::delta_chunk(int index, const ChatDelta& d) const {
    json delta = json::object();
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.reasoning.empty()) put_reasoning(delta, d.reasoning);
    if (!d.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& f : d.tool_calls) {
            json call = {{"index", f.index}};
            if (f.first) {
                call["id"] = f.id;
                call["type"] = "function";
                call["function"] = {{"name", f.name}, {"arguments", f.arguments}};
            } else {
                call["function"] = {{"arguments", f.arguments}};
            }
            calls.push_back(std::move(call));
        }
        delta["tool_calls"] = std::move(calls);
    }
    json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (d.has_logprobs) choice["logprobs"] = {{"content", chat_logprobs_content(d.logprobs)}};
    if (!d.token_ids.empty()) choice["token_ids"] = d.token_ids;
    return chunk(json::array({std::move(choice)}));
}

json ChatResponseBuilder::finish_chunk(int index, std::string_view finish_reason, const json& stop_reason) const {
    return chunk(json::array({{{"index", index},
                               {"delta", json::object()},
                               {"logprobs", nullptr},
                               {"finish_reason", finish_reason},
                               {"stop_reason", stop_reason}}}));
}

json ChatResponseBuilder::usage_chunk(const Usage& usage) const {
    json out = chunk(json::array());
    out["usage"] = usage.to_json();
    return out;
}

json CompletionResponseBuilder::response(const std::vector<CompletionChoice>& choices, const Usage& usage) const {
    json out_choices = json::array();
    for (const auto& c : choices) {
        json choice = {{"index", c.index},
                       {"text", c.text},
                       {"logprobs", c.logprobs},
                       {"finish_reason", c.finish_reason},
                       {"stop_reason", c.stop_reason}};
        if (c.token_ids) choice["token_ids"] = *c.token_ids;
        out_choices.push_back(std::move(choice));
    }
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", std::move(out_choices)},
            {"usage", usage.to_json()}};
}

json CompletionResponseBuilder::chunk(int index, std::string_view text, const json& logprobs,
                                      const std::optional<std::string>& finish_reason, const json& stop_reason) const {
    json choice = {{"index", index},
                   {"text", text},
                   {"logprobs", logprobs},
                   {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
    if (finish_reason) choice["stop_reason"] = stop_reason;
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({std::move(choice)})}};
}

json CompletionResponseBuilder::usage_chunk(const Usage& usage) const {
    return {{"id", id_},          {"object", "text_completion"}, {"created", created_},
            {"model", model_},    {"choices", json::array()},    {"usage", usage.to_json()}};
}

json models_list(const std::vector<ModelCard>& models) {
    json data = json::array();
    for (const auto& m : models) {
        json card = {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}};
        card["root"] = m.root.empty() ? m.id : m.root;
        card["parent"] = nullptr;
        if (m.max_model_len > 0) card["max_model_len"] = m.max_model_len;
        data.push_back(std::move(card));
    }
    return {{"object", "list"}, {"data", std::move(data)}};
}

std::int64_t unix_time_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace msa::server
