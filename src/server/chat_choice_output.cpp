#include "server/chat_choice_output.h"

namespace msa::server {

ChatChoiceOutput::ChatChoiceOutput(int index, const ChatOutputOptions& options)
    : index_(index),
      include_reasoning_(options.include_reasoning),
      logprobs_(options.logprobs),
      return_token_ids_(options.return_token_ids) {
    if (!options.reasoning_parser.empty()) {
        std::optional<std::string_view> prompt;
        if (options.prompt) prompt = *options.prompt;
        reasoning_ = make_reasoning_parser(options.reasoning_parser, prompt, options.thinking_mode);
        saw_reasoning_ = reasoning_->saw_reasoning();
    }
    if (options.tool_format && options.tools != nullptr) {
        tools_ = std::make_unique<ToolCallParser>(*options.tool_format, *options.tools, options.ids,
                                                  options.max_tool_calls);
        if (!options.forced_prefix.empty()) pending_ = tools_->feed(options.forced_prefix);
    }
}

void ChatChoiceOutput::take(const ReasoningDelta& split, ChatDelta& delta) {
    if (!split.reasoning.empty()) {
        reasoning_text_ += split.reasoning;
        if (include_reasoning_) delta.reasoning += split.reasoning;
    }
    if (split.content.empty()) return;
    if (!tools_) {
        content_ += split.content;
        delta.content += split.content;
        return;
    }
    ToolParseDelta parsed = tools_->feed(split.content);
    content_ += parsed.content;
    delta.content += parsed.content;
    ToolParseDelta merged;
    merged.append(std::move(pending_));
    pending_ = {};
    merged.append(std::move(parsed));
    for (auto& f : merged.tool_calls) delta.tool_calls.push_back(std::move(f));
}

ChatDelta ChatChoiceOutput::add(const GenerationEvent& event) {
    ChatDelta delta;
    if (finished_) return delta;
    const auto n = static_cast<std::int64_t>(event.token_ids.size());
    completion_tokens_ += n;
    if (reasoning_) {
        // Tokens count as reasoning when generation was inside reasoning as they started (event granularity).
        if (reasoning_->in_reasoning()) reasoning_tokens_ += n;
        take(reasoning_->feed(event.text), delta);
        saw_reasoning_ = saw_reasoning_ || reasoning_->saw_reasoning();
    } else {
        take(ReasoningDelta{{}, event.text}, delta);
    }
    if (logprobs_) {
        delta.has_logprobs = !event.logprobs.empty();
        delta.logprobs = event.logprobs;
        logprob_list_.insert(logprob_list_.end(), event.logprobs.begin(), event.logprobs.end());
    }
    if (return_token_ids_) {
        delta.token_ids = event.token_ids;
        token_ids_.insert(token_ids_.end(), event.token_ids.begin(), event.token_ids.end());
    }
    if (event.finished) {
        finished_ = true;
        finish_reason_ = event.finish_reason.empty() ? "stop" : event.finish_reason;
        stop_reason_ = event.stop_reason;
        error_ = event.error;
        if (reasoning_) take(reasoning_->finish(), delta);
        if (tools_) {
            ToolParseDelta rest;
            rest.append(std::move(pending_));
            pending_ = {};
            rest.append(tools_->finish());
            content_ += rest.content;
            delta.content += rest.content;
            for (auto& f : rest.tool_calls) delta.tool_calls.push_back(std::move(f));
        }
    }
    return delta;
}

const std::vector<ToolCallResult>& ChatChoiceOutput::tool_calls() const {
    static const std::vector<ToolCallResult> kNone;
    return tools_ ? tools_->calls() : kNone;
}

std::string ChatChoiceOutput::finish_reason() const {
    if (finish_reason_ == "stop" && !tool_calls().empty()) return "tool_calls";
    return finish_reason_;
}

ChatChoice ChatChoiceOutput::result() const {
    ChatChoice c;
    c.index = index_;
    c.content = content_;
    if (reasoning_ && include_reasoning_ && (saw_reasoning_ || !reasoning_text_.empty())) c.reasoning = reasoning_text_;
    c.tool_calls = tool_calls();
    c.finish_reason = finish_reason();
    c.stop_reason = stop_reason_;
    if (logprobs_) c.logprobs = logprob_list_;
    if (return_token_ids_) c.token_ids = token_ids_;
    return c;
}

}  // namespace msa::server
