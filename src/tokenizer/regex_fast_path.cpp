#include "tokenizer/regex_fast_path.h"

#include <array>
#include <cstdint>

namespace msa {
namespace {

// ASCII classes as the patterns see them: letters, digits, whitespace other than CR/LF (\t \v \f and space), CR/LF,
// everything else ASCII ("other": punctuation, symbols, controls), and bytes of non-ASCII characters.
enum Class : std::uint8_t { kLetter, kDigit, kSpace, kNewline, kOther, kNonAscii, kEnd };

constexpr std::array<std::uint8_t, 256> make_classes() {
    std::array<std::uint8_t, 256> t{};
    for (int b = 0; b < 256; ++b) {
        std::uint8_t c = kOther;
        if (b >= 0x80) c = kNonAscii;
        else if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) c = kLetter;
        else if (b >= '0' && b <= '9') c = kDigit;
        else if (b == '\n' || b == '\r') c = kNewline;
        else if (b == '\t' || b == 0x0B || b == 0x0C || b == ' ') c = kSpace;
        t[static_cast<std::size_t>(b)] = c;
    }
    return t;
}
constexpr std::array<std::uint8_t, 256> kClasses = make_classes();

// ASCII punctuation and symbols (all of them are \p{P} or \p{S}); the other "other" bytes are controls.
bool is_ascii_punctuation(char c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

class Scanner {
public:
    explicit Scanner(std::string_view text) : text_(text) {}
    std::uint8_t at(std::size_t i) const {
        return i < text_.size() ? kClasses[static_cast<unsigned char>(text_[i])] : static_cast<std::uint8_t>(kEnd);
    }
    char byte(std::size_t i) const { return i < text_.size() ? text_[i] : '\0'; }
    static char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

    // End of the run of class `c` from i, or unknown if the run reaches a non-ASCII character (which might belong).
    std::size_t run(std::size_t i, std::uint8_t c) const {
        while (at(i) == c) ++i;
        return at(i) == kNonAscii ? kFastMatchUnknown : i;
    }
    std::size_t size() const { return text_.size(); }

private:
    std::string_view text_;
};

// The contraction alternatives at an apostrophe: the end of the match, 0 if none matches, or unknown.
std::size_t contraction(const Scanner& s, std::size_t p, bool case_insensitive) {
    const char c1 = s.byte(p + 1);
    if (s.at(p + 1) == kNonAscii) {
        // Case-insensitively, U+017F LATIN SMALL LETTER LONG S matches 's'.
        return case_insensitive ? kFastMatchUnknown : 0;
    }
    const char a = case_insensitive ? Scanner::lower(c1) : c1;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
    const char b = case_insensitive ? Scanner::lower(s.byte(p + 2)) : s.byte(p + 2);
    if ((a == 'r' || a == 'v') && b == 'e') return p + 3;
    if (a == 'l' && b == 'l') return p + 3;
    return 0;
}

// Whitespace alternatives: \s*[\r\n]+ (when with_newline_rule), then \s+(?!\S), then \s+.
std::size_t whitespace(const Scanner& s, std::size_t p, bool with_newline_rule) {
    std::size_t w = p;
    std::size_t last_newline = 0;
    bool newline = false;
    while (s.at(w) == kSpace || s.at(w) == kNewline) {
        if (s.at(w) == kNewline) {
            newline = true;
            last_newline = w;
        }
        ++w;
    }
    if (s.at(w) == kNonAscii) return kFastMatchUnknown;  // the run may go on with Unicode whitespace
    if (with_newline_rule && newline) return last_newline + 1;
    if (w == s.size()) return w;
    if (w - p >= 2) return w - 1;
    return w;
}

std::size_t match_qwen(const Scanner& s, std::size_t p, bool up_to_three_digits) {
    const std::uint8_t c = s.at(p);
    if (s.byte(p) == '\'') {
        const std::size_t end = contraction(s, p, true);
        if (end != 0) return end;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c == kLetter) return s.run(p, kLetter);
    if (c == kSpace || c == kOther) {
        if (s.at(p + 1) == kNonAscii) return kFastMatchUnknown;
        if (s.at(p + 1) == kLetter) return s.run(p + 1, kLetter);
    }
    // \p{N} or \p{N}{1,3}
    if (c == kDigit) {
        if (!up_to_three_digits) return p + 1;
        std::size_t i = p + 1;
        while (i < p + 3 && s.at(i) == kDigit) ++i;
        if (i < p + 3 && s.at(i) == kNonAscii) return kFastMatchUnknown;
        return i;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    const std::size_t q = s.byte(p) == ' ' ? p + 1 : p;
    if (s.at(q) == kOther) {
        std::size_t i = s.run(q, kOther);
        if (i == kFastMatchUnknown) return i;
        while (s.at(i) == kNewline) ++i;
        return i;
    }
    if (q == p + 1 && s.at(q) == kNonAscii) return kFastMatchUnknown;
    return whitespace(s, p, true);
}

std::size_t match_gpt2(const Scanner& s, std::size_t p) {
    if (s.byte(p) == '\'') {
        const std::size_t end = contraction(s, p, false);
        if (end != 0) return end;
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
    const std::size_t q = s.byte(p) == ' ' ? p + 1 : p;
    const std::uint8_t c = s.at(q);
    if (c == kLetter || c == kDigit || c == kOther) return s.run(q, c);
    if (c == kNonAscii) return kFastMatchUnknown;
    return whitespace(s, p, false);
}

// DeepSeek-V3's word split at p: the end of the match, p when no alternative matches at p, or unknown.
std::size_t match_deepseek(const Scanner& s, std::size_t p) {
    const std::uint8_t c = s.at(p);
    const bool punctuation = c == kOther && is_ascii_punctuation(s.byte(p));
    // [!"#...~][A-Za-z]+ (ASCII letters only, so non-ASCII simply ends the run)
    if (punctuation && s.at(p + 1) == kLetter) {
        std::size_t i = p + 1;
        while (s.at(i) == kLetter) ++i;
        return i;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ (ASCII has no marks)
    if (c == kLetter) return s.run(p, kLetter);
    if (c == kDigit || c == kSpace || (c == kOther && !punctuation)) {
        if (s.at(p + 1) == kNonAscii) return kFastMatchUnknown;
        if (s.at(p + 1) == kLetter) return s.run(p + 1, kLetter);
    }
    // " ?[\p{P}\p{S}]+[\r\n]*"
    const std::size_t q = s.byte(p) == ' ' ? p + 1 : p;
    if (s.at(q) == kOther && is_ascii_punctuation(s.byte(q))) {
        std::size_t i = q;
        while (s.at(i) == kOther && is_ascii_punctuation(s.byte(i))) ++i;
        if (s.at(i) == kNonAscii) return kFastMatchUnknown;
        while (s.at(i) == kNewline) ++i;
        return i;
    }
    if (q == p + 1 && s.at(q) == kNonAscii) return kFastMatchUnknown;
    if (c == kSpace || c == kNewline) return whitespace(s, p, true);
    return p;  // a digit not followed by a letter, or a control character: no match starts here
}

}  // namespace

FastPattern detect_fast_pattern(std::string_view pattern) {
    if (pattern == kQwenSplitPattern) return FastPattern::kQwen;
    if (pattern == kCl100kSplitPattern) return FastPattern::kCl100k;
    if (pattern == kGpt2SplitPattern) return FastPattern::kGpt2;
    if (pattern == kDigits3SplitPattern) return FastPattern::kDigits3;
    if (pattern == kDeepSeekSplitPattern) return FastPattern::kDeepSeek;
    return FastPattern::kNone;
}

FastResult fast_find(FastPattern pattern, std::string_view text, std::size_t start, std::size_t& begin,
                     std::size_t& end) {
    const Scanner s(text);
    const std::size_t n = text.size();
    std::size_t match_end = kFastMatchUnknown;
    switch (pattern) {
        case FastPattern::kQwen:
        case FastPattern::kCl100k:
        case FastPattern::kGpt2:
            // These patterns match at every position, so the leftmost match starts at `start`.
            if (start >= n) return FastResult::kNoMatch;
            if (s.at(start) == kNonAscii) return FastResult::kUnknown;
            match_end = pattern == FastPattern::kGpt2 ? match_gpt2(s, start)
                                                       : match_qwen(s, start, pattern == FastPattern::kCl100k);
            if (match_end == kFastMatchUnknown) return FastResult::kUnknown;
            begin = start;
            end = match_end;
            return FastResult::kMatch;
        case FastPattern::kDigits3:
            for (std::size_t p = start; p < n; ++p) {
                if (s.at(p) == kNonAscii) return FastResult::kUnknown;  // it might be a non-ASCII digit
                if (s.at(p) != kDigit) continue;
                std::size_t i = p + 1;
                while (i < p + 3 && s.at(i) == kDigit) ++i;
                if (i < p + 3 && s.at(i) == kNonAscii) return FastResult::kUnknown;
                begin = p;
                end = i;
                return FastResult::kMatch;
            }
            return FastResult::kNoMatch;
        case FastPattern::kDeepSeek:
            for (std::size_t p = start; p < n; ++p) {
                if (s.at(p) == kNonAscii) return FastResult::kUnknown;
                match_end = match_deepseek(s, p);
                if (match_end == kFastMatchUnknown) return FastResult::kUnknown;
                if (match_end > p) {
                    begin = p;
                    end = match_end;
                    return FastResult::kMatch;
                }
            }
            return FastResult::kNoMatch;
        case FastPattern::kNone:
            break;
    }
    return FastResult::kUnknown;
}

}  // namespace msa
