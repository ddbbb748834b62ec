// Regular expressions for tokenizer.json patterns. The files are written for Oniguruma (Ruby syntax), the engine
// Hugging Face `tokenizers` uses; we match them with PCRE2 (UTF + UCP, JIT-compiled) after translating the pattern so
// that it means what it means to Oniguruma: \s, \d, \w, \h and \p{..} classes are rewritten to the oracle's
// character sets (see unicode.h), ^/$ are line anchors and (?m) is dot-all, as in Ruby syntax. Constructs that
// cannot be translated exactly (nested classes, class intersection, negated Unicode classes inside a class whose
// PCRE2 tables differ from the oracle's) are rejected with an error instead of silently matching differently.
//
// Matching is thread-safe: every thread uses its own PCRE2 match data (and JIT stack when a large one is needed).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tokenizer/regex_fast_path.h"

struct pcre2_real_code_8;

namespace msa {

class Regex {
public:
    // Compiles an Oniguruma-syntax pattern. Throws msa::Error naming the pattern on failure. The common
    // pre-tokenizer patterns get a hand-written ASCII fast path (regex_fast_path.h) unless allow_fast_path is false
    // or the environment sets MSA_FORCE_SCALAR (to anything but "0", as the kernels read it).
    explicit Regex(std::string_view oniguruma_pattern, bool allow_fast_path = true);
    // A pattern that matches the literal text (tokenizer.json's {"String": ...} patterns).
    static Regex literal(std::string_view text);

    Regex(Regex&& other) noexcept;
    Regex& operator=(Regex&& other) noexcept;
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    ~Regex();

    // Finds the leftmost match starting at or after byte `start` of `text` (valid UTF-8). Returns false if none.
    bool find(std::string_view text, std::size_t start, std::size_t& match_begin, std::size_t& match_end) const;

    // Calls on_match(begin, end) for every match, left to right, with Oniguruma's iteration rule: an empty match
    // right where the previous match ended is skipped.
    template <typename F>
    void for_each_match(std::string_view text, F&& on_match) const;

    const std::string& pattern() const { return pattern_; }
    const std::string& pcre2_pattern() const { return pcre2_pattern_; }

private:
    Regex() = default;
    void compile();

    std::string pattern_;
    std::string pcre2_pattern_;
    pcre2_real_code_8* code_ = nullptr;
    bool jit_ = false;
    FastPattern fast_ = FastPattern::kNone;
};

// Translates an Oniguruma (Ruby syntax) pattern to an equivalent PCRE2 pattern (exposed for tests).
std::string translate_oniguruma_pattern(std::string_view pattern);

// The PCRE2 character-class body (without brackets) that matches exactly the oracle's class `name` (see
// unicode_class_ranges). If `negated_member` is given, it receives a PCRE2 escape for the complement that is exact
// inside a class (e.g. "\\P{N}"), or an empty string when no such escape exists.
std::string oracle_class_body(std::string_view name, std::string* negated_member = nullptr);

template <typename F>
void Regex::for_each_match(std::string_view text, F&& on_match) const {
    std::size_t search_from = 0;
    bool have_previous = false;
    std::size_t previous_end = 0;
    while (search_from <= text.size()) {
        std::size_t begin = 0, end = 0;
        if (!find(text, search_from, begin, end)) return;
        if (begin == end && have_previous && end == previous_end) {
            // Step over one character (or past the end) and search again.
            if (search_from >= text.size()) return;
            const auto lead = static_cast<unsigned char>(text[search_from]);
            search_from += lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
            continue;
        }
        search_from = end;
        have_previous = true;
        previous_end = end;
        on_match(begin, end);
    }
}

}  // namespace msa
