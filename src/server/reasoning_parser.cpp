#include "server/reasoning_parser.h"

#include "core/error.h"

#include <algorithm>

namespace msa::server {

ThinkingMode parse_thinking_mode(std::string_view value) {
    if (value.empty()) return ThinkingMode::unspecified;
    if (value == "enabled") return ThinkingMode::enabled;
    if (value == "disabled") return ThinkingMode::disabled;
    if (value == "adaptive") return ThinkingMode::adaptive;
    fail("Unknown thinking_mode '{}': use enabled, disabled or adaptive.", value);
}

std::size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
    const std::size_t longest = std::min(text.size(), marker.size() - 1);
    for (std::size_t n = longest; n > 0; --n) {
        if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
    }
    return 0;
}

ReasoningParser::ReasoningParser(ReasoningMarkers markers, bool start_in_reasoning)
    : markers_(std::move(markers)), in_reasoning_(start_in_reasoning), saw_reasoning_(start_in_reasoning) {}

void ReasoningParser::emit(std::string_view text, ReasoningDelta& out) {
    if (strip_line_breaks_) {
        const auto first = text.find_first_not_of("\r\n");
        if (first == std::string_view::npos) return;
        text.remove_prefix(first);
        strip_line_breaks_ = false;
    }
    (in_reasoning_ ? out.reasoning : out.content).append(text);
}

ReasoningDelta ReasoningParser::feed(std::string_view text) {
    pending_.append(text);
    ReasoningDelta out;
    std::size_t pos = 0;
    while (true) {
        const auto open = pending_.find(markers_.open, pos);
        const auto close = pending_.find(markers_.close, pos);
        const auto at = std::min(open, close);
        if (at == std::string::npos) break;
        emit(std::string_view(pending_).substr(pos, at - pos), out);
        if (at == open) {
            if (!in_reasoning_) in_reasoning_ = saw_reasoning_ = true;
            pos = at + markers_.open.size();
        } else {
            in_reasoning_ = false;
            pos = at + markers_.close.size();
        }
        strip_line_breaks_ = true;
    }
    const std::string_view rest = std::string_view(pending_).substr(pos);
    const std::size_t hold = std::max(partial_marker_suffix(rest, markers_.open),
                                      partial_marker_suffix(rest, markers_.close));
    emit(rest.substr(0, rest.size() - hold), out);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

ReasoningDelta ReasoningParser::finish() {
    ReasoningDelta out;
    emit(pending_, out);
    pending_.clear();
    return out;
}

bool is_reasoning_parser_name(std::string_view name) { return name == "minimax_m3" || name == "minimax_m2"; }

ReasoningMarkers reasoning_markers(std::string_view parser_name) {
    if (parser_name == "minimax_m3") return {"<mm:think>", "</mm:think>"};
    if (parser_name == "minimax_m2") return {"<think>", "</think>"};
    fail("Unknown reasoning parser '{}': use minimax_m3 or minimax_m2.", parser_name);
}

bool generation_starts_in_reasoning(std::string_view parser_name, std::optional<std::string_view> prompt,
                                    ThinkingMode mode) {
    const auto markers = reasoning_markers(parser_name);
    if (prompt) {
        std::string_view tail = *prompt;
        const auto last = tail.find_last_not_of(" \t\r\n");
        tail = last == std::string_view::npos ? std::string_view() : tail.substr(0, last + 1);
        return tail.ends_with(markers.open);
    }
    if (parser_name == "minimax_m2") return true;
    return mode == ThinkingMode::enabled;
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(std::string_view parser_name,
                                                       std::optional<std::string_view> prompt, ThinkingMode mode) {
    return std::make_unique<ReasoningParser>(reasoning_markers(parser_name),
                                             generation_starts_in_reasoning(parser_name, prompt, mode));
}

}  // namespace msa::server
