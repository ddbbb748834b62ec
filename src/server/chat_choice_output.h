// Turns the generated text of one chat choice into what the client sees: the reasoning parser splits reasoning
// from content, the tool-call parser takes tool calls out of the content, and the result is both streamed (one
// ChatDelta per backend event) and accumulated (the final ChatChoice). Both paths come from the same parser
// output, so a stream always concatenates to the non-streamed response.
#pragma once

#include "server/openai_response.h"
#include "server/reasoning_parser.h"
#include "server/serving_backend.h"
#include "server/tool_call_parser.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace msa::server {

struct ChatOutputOptions {
    std::string reasoning_parser;                // "" = no reasoning parsing
    std::optional<std::string> prompt;           // the rendered prompt (where generation starts)
    ThinkingMode thinking_mode = ThinkingMode::unspecified;
    bool include_reasoning = true;
    std::optional<ToolCallFormat> tool_format;   // unset = no tool-call parsing
    const std::vector<ToolDefinition>* tools = nullptr;
    std::size_t max_tool_calls = static_cast<std::size_t>(-1);
    std::string forced_prefix;                   // appended to the prompt to force a call; parsed first
    bool logprobs = false;
    bool return_token_ids = false;
    IdGenerator ids;                             // tool-call ids (default: random)
};

class ChatChoiceOutput {
public:
    ChatChoiceOutput(int index, const ChatOutputOptions& options);

    // Processes one backend event; returns what to stream now (may be empty). On the finishing event the
    // parsers are flushed into the returned delta as well.
    ChatDelta add(const GenerationEvent& event);

    bool finished() const { return finished_; }
    // The finish reason the client sees: "tool_calls" when the model stopped after calling tools.
    std::string finish_reason() const;
    const nlohmann::json& stop_reason() const { return stop_reason_; }
    const std::optional<ApiError>& error() const { return error_; }
    const std::vector<ToolCallResult>& tool_calls() const;

    ChatChoice result() const;
    std::int64_t completion_tokens() const { return completion_tokens_; }
    std::int64_t reasoning_tokens() const { return reasoning_tokens_; }
    bool has_reasoning_parser() const { return reasoning_ != nullptr; }

private:
    void take(const ReasoningDelta& split, ChatDelta& delta);

    int index_;
    bool include_reasoning_;
    bool logprobs_;
    bool return_token_ids_;
    std::unique_ptr<ReasoningParser> reasoning_;
    std::unique_ptr<ToolCallParser> tools_;
    ToolParseDelta pending_;                     // output of the forced prefix, sent with the first delta
    std::string content_;
    std::string reasoning_text_;
    bool saw_reasoning_ = false;
    std::vector<TokenLogprob> logprob_list_;
    std::vector<std::int32_t> token_ids_;
    std::int64_t completion_tokens_ = 0;
    std::int64_t reasoning_tokens_ = 0;
    bool finished_ = false;
    std::string finish_reason_ = "stop";
    nlohmann::json stop_reason_ = nullptr;
    std::optional<ApiError> error_;
};

}  // namespace msa::server
