// Splits generated text into reasoning and content (api.md section 5), incrementally and safely for streaming.
//
// Parsers: "minimax_m3" (markers <mm:think> and </mm:think>) and "minimax_m2" (<think> and </think>).
// Rules, the same for every chunking of the text:
//  - Only generated text is parsed. Where generation starts (inside reasoning or not) is decided once, from the
//    tail of the rendered prompt: a template that pre-fills the open marker (M3 thinking_mode "enabled", the M2
//    template) makes generation start inside reasoning. Markers elsewhere in the prompt (instructions that mention
//    them) are never looked at.
//  - An open marker outside reasoning starts reasoning (text before it is content); a close marker inside
//    reasoning ends it. A marker that changes nothing (an open marker inside reasoning, a close marker in content)
//    is dropped: marker text never reaches `content` (nor `reasoning`).
//  - A text suffix that could be the start of a marker is held back until the next text decides it; finish()
//    releases whatever is still held back as ordinary text.
//  - Line breaks right after a marker (and at the very start of generation) are dropped: the templates put "\n"
//    around markers, and clients should not see reasoning or content that starts with blank lines.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace msa::server {

struct ReasoningMarkers {
    std::string open;
    std::string close;
};

struct ReasoningDelta {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
};

// chat_template_kwargs.thinking_mode of MiniMax-M3.
enum class ThinkingMode { unspecified, enabled, disabled, adaptive };
// Parses thinking_mode ("" = unspecified); throws msa::Error on other values.
ThinkingMode parse_thinking_mode(std::string_view value);

class ReasoningParser {
public:
    ReasoningParser(ReasoningMarkers markers, bool start_in_reasoning);

    // Feeds the next piece of generated text; returns what can be released now.
    ReasoningDelta feed(std::string_view text);
    // End of generation: releases any held-back text.
    ReasoningDelta finish();

    bool in_reasoning() const { return in_reasoning_; }
    // True once any reasoning was seen (or generation started inside it).
    bool saw_reasoning() const { return saw_reasoning_; }

private:
    void emit(std::string_view text, ReasoningDelta& out);

    ReasoningMarkers markers_;
    std::string pending_;
    bool in_reasoning_;
    bool saw_reasoning_;
    bool strip_line_breaks_ = true;
};

// Names accepted by --reasoning-parser.
bool is_reasoning_parser_name(std::string_view name);
// The markers of a parser; throws msa::Error for an unknown name.
ReasoningMarkers reasoning_markers(std::string_view parser_name);

// Whether generation starts inside reasoning. With the rendered prompt known, the prompt decides: it does when the
// prompt ends (ignoring trailing whitespace) with the open marker. Without it (token-id prompts), M3 follows
// thinking_mode (enabled -> inside) and M2 assumes its template's pre-filled <think>.
bool generation_starts_in_reasoning(std::string_view parser_name, std::optional<std::string_view> prompt,
                                    ThinkingMode mode);

std::unique_ptr<ReasoningParser> make_reasoning_parser(std::string_view parser_name,
                                                       std::optional<std::string_view> prompt, ThinkingMode mode);

// Length of the longest suffix of `text` that is a proper prefix of `marker` (what must be held back).
std::size_t partial_marker_suffix(std::string_view text, std::string_view marker);

}  // namespace msa::server
