#include "engine/stop_string_matcher.h"

#include <algorithm>

namespace msa {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output)
    : stops_(std::move(stops)), include_stop_(include_stop_in_output) {
    for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view new_text, bool active) {
    Result result;
    if (stops_.empty()) {
        result.text.assign(new_text);
        return result;
    }
    std::string buf = std::move(held_);
    held_.clear();
    const std::size_t new_start = buf.size();
    buf.append(new_text);

    if (active) {
        std::size_t best_pos = std::string::npos, best_end = std::string::npos;
        const std::string* best = nullptr;
        for (const auto& s : stops_) {
            // Only a match ending after new_start is new; the first occurrence from there ends first for this s.
            const std::size_t from = new_start >= s.size() ? new_start - s.size() + 1 : 0;
            const std::size_t pos = buf.find(s, from);
            if (pos == std::string::npos) continue;
            const std::size_t end = pos + s.size();
            if (best == nullptr || end < best_end || (end == best_end && pos < best_pos)) {
                best = &s;
                best_pos = pos;
                best_end = end;
            }
        }
        if (best != nullptr) {
            result.text.assign(buf, 0, include_stop_ ? best_end : best_pos);
            result.matched = *best;
            return result;
        }
    }

    // Hold back the longest suffix that is a proper prefix of some stop string.
    std::size_t hold = 0;
    for (std::size_t len = std::min(buf.size(), max_len_ - 1); len > 0 && hold == 0; --len) {
        const std::string_view suffix(buf.data() + buf.size() - len, len);
        for (const auto& s : stops_) {
            if (s.size() > len && std::string_view(s).substr(0, len) == suffix) {
                hold = len;
                break;
            }
        }
    }
    result.text.assign(buf, 0, buf.size() - hold);
    held_.assign(buf, buf.size() - hold, hold);
    return result;
}

std::string StopStringMatcher::flush() {
    std::string out = std::move(held_);
    held_.clear();
    return out;
}

}  // namespace msa
