// Stop strings over streamed text: a stop string may be split across tokens, is cut from the output (unless the
// request includes it), and text that might be the start of a stop string is held back from the stream until it
// is known not to be one.
//
// Semantics (as vLLM): a stop string only counts if it ends inside the newly appended text; with several stop
// strings the one that completes first wins (ties: the one that starts first). Matching is byte-exact on UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

class StopStringMatcher {
public:
    StopStringMatcher() = default;
    StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output);

    struct Result {
        std::string text;                    // text that may be emitted now
        std::optional<std::string> matched;  // the stop string that ended generation, if any
    };

    // Appends new text. When `active` is false (min_tokens not yet reached) no stop string can match, but
    // possible stop-string prefixes are still held back.
    Result push(std::string_view new_text, bool active);
    // End of generation for another reason: everything held back is plain text.
    std::string flush();
    const std::string& held() const { return held_; }

private:
    std::vector<std::string> stops_;
    bool include_stop_ = false;
    std::size_t max_len_ = 0;
    std::string held_;
};

}  // namespace msa
