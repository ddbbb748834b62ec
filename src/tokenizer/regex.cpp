#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <map>
#include <mutex>
#include <vector>

#include "core/env_flag.h"
#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace msa {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Per-thread matching state: one match data block (we only read the overall match, so one ovector pair serves every
// pattern) and, created on first need, a large JIT stack for inputs that overflow PCRE2's default 32 KiB.
struct ThreadMatchState {
    pcre2_match_data* match_data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;

    ThreadMatchState() { match_data = pcre2_match_data_create(1, nullptr); }
    ~ThreadMatchState() {
        pcre2_match_data_free(match_data);
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(jit_stack);
    }
    pcre2_match_context* large_stack_context() {
        if (context == nullptr) {
            context = pcre2_match_context_create(nullptr);
            jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
            pcre2_jit_stack_assign(context, nullptr, jit_stack);
        }
        return context;
    }
};

ThreadMatchState& thread_match_state() {
    thread_local ThreadMatchState state;
    return state;
}

std::string pcre2_error_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
    return n > 0 ? std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n)) : "unknown error";
}

std::string hex_code_point(char32_t cp) { return fmt::format("\\x{{{:x}}}", static_cast<std::uint32_t>(cp)); }

std::string ranges_body(const std::vector<CodePointRange>& ranges) {
    std::string body;
    for (const CodePointRange& r : ranges) {
        body += hex_code_point(r.first);
        if (r.last != r.first) {
            body += '-';
            body += hex_code_point(r.last);
        }
    }
    return body;
}

// The set of code points PCRE2 itself matches with the class body `body`, found by scanning a string made of every
// code point in order with [body]+: each match is one run of members.
std::vector<CodePointRange> pcre2_class_ranges(const std::string& body) {
    std::string all;
    all.reserve(4500000);
    for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        utf8::append(all, cp);
    }
    const std::string pattern = "[" + body + "]+";
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                     &error, &offset, nullptr);
    MSA_CHECK(code != nullptr, "internal error: cannot compile character class [{}]: {}", body,
              pcre2_error_message(error));
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    std::vector<CodePointRange> ranges;
    std::size_t pos = 0;
    while (pos < all.size()) {
        const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(all.data()), all.size(), pos, PCRE2_NO_UTF_CHECK,
                                   md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        std::size_t p = ov[0];
        const char32_t first = utf8::decode(all, p);
        // The last code point of the match: step back to its lead byte.
        std::size_t last_pos = ov[1] - 1;
        while ((static_cast<unsigned char>(all[last_pos]) & 0xC0) == 0x80) --last_pos;
        const char32_t last = utf8::decode(all, last_pos);
        ranges.push_back({first, last});
        pos = ov[1];
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    // A run across the surrogate gap comes back as one range; difference() skips surrogates.
    return ranges;
}

bool contains(const std::vector<CodePointRange>& ranges, char32_t cp) {
    std::size_t lo = 0, hi = ranges.size();
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (ranges[mid].last < cp) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < ranges.size() && ranges[lo].first <= cp;
}

// Code points of `a` that are not in `b`, as ranges.
std::vector<CodePointRange> difference(const std::vector<CodePointRange>& a, const std::vector<CodePointRange>& b) {
    std::vector<CodePointRange> out;
    for (const CodePointRange& r : a) {
        for (char32_t cp = r.first; cp <= r.last; ++cp) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            if (contains(b, cp)) continue;
            if (!out.empty() && out.back().last + 1 == cp) {
                out.back().last = cp;
            } else {
                out.push_back({cp, cp});
            }
        }
    }
    return out;
}

struct ClassBody {
    std::string body;            // members, to put inside [...]
    std::string negated_member;  // a PCRE2 escape for the complement usable inside [...], or empty if none is exact
};

ClassBody compute_class_body(std::string_view name) {
    std::vector<CodePointRange> target;
    MSA_CHECK(unicode_class_ranges(name, target), "unknown character class '{}'", name);
    // Small sets are written out in full; large ones are PCRE2's own class plus the code points its (older) tables
    // lack, which is as fast as the plain class for the common characters.
    if (target.size() <= 16) {
        return {ranges_body(target), ""};
    }
    std::string base;
    if (name == "w") {
        base = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}\\p{Nl}";
    } else if (name == "d") {
        base = "\\p{Nd}";
    } else {
        base = "\\p{" + std::string(name) + "}";
    }
    const std::vector<CodePointRange> pcre2_set = pcre2_class_ranges(base);
    const std::vector<CodePointRange> missing = difference(target, pcre2_set);
    const std::vector<CodePointRange> extra = difference(pcre2_set, target);
    if (!extra.empty()) {
        // PCRE2 puts some code point in this class that the oracle does not: only a full list is exact.
        return {ranges_body(target), ""};
    }
    // The complement can be written inside a class only when PCRE2's single property is already exact.
    const bool single_property = name != "w";
    std::string negated;
    if (missing.empty() && single_property) negated = "\\P" + base.substr(2);
    return {base + ranges_body(missing), negated};
}

bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

class Translator {
public:
    explicit Translator(std::string_view pattern) : p_(pattern) {}

    std::string run() {
        while (i_ < p_.size()) {
            const char c = p_[i_];
            if (c == '\\') {
                escape(false);
            } else if (c == '[') {
                character_class();
            } else if (c == '(' && i_ + 1 < p_.size() && p_[i_ + 1] == '?') {
                group_flags();
            } else if (c == '^') {
                out_ += "(?m:^)";
                ++i_;
            } else if (c == '$') {
                out_ += "(?m:$)";
                ++i_;
            } else {
                out_ += c;
                ++i_;
            }
        }
        return out_;
    }

private:
    [[noreturn]] void unsupported(std::string_view what) const {
        fail("regex pattern '{}': {} at offset {} is not supported (it has no exact PCRE2 equivalent)", p_, what, i_);
    }

    // Reads "{Name}" or "{^Name}" or a one-letter name after \p / \P; returns the name and whether it is negated.
    std::string property_name(bool& negated) {
        negated = false;
        if (i_ < p_.size() && p_[i_] == '{') {
            const std::size_t close = p_.find('}', i_);
            if (close == std::string_view::npos) unsupported("an unterminated \\p{");
            std::string name(p_.substr(i_ + 1, close - i_ - 1));
            i_ = close + 1;
            if (!name.empty() && name[0] == '^') {
                negated = true;
                name.erase(0, 1);
            }
            return name;
        }
        if (i_ >= p_.size()) unsupported("a trailing \\p");
        return std::string(1, p_[i_++]);
    }

    void escape(bool in_class) {
        const std::size_t start = i_;
        ++i_;  // the backslash
        if (i_ >= p_.size()) {
            out_ += '\\';
            return;
        }
        const char c = p_[i_++];
        std::string name;
        bool negated = false;
        switch (c) {
            case 's': case 'S': name = "s"; negated = c == 'S'; break;
            case 'd': case 'D': name = "d"; negated = c == 'D'; break;
            case 'w': case 'W': name = "w"; negated = c == 'W'; break;
            case 'h': case 'H':
                // Oniguruma's \h is a hexadecimal digit (PCRE2's \h is horizontal space).
                if (in_class) {
                    if (c == 'H') unsupported("\\H inside a character class");
                    out_ += "0-9a-fA-F";
                } else {
                    out_ += c == 'h' ? "[0-9a-fA-F]" : "[^0-9a-fA-F]";
                }
                return;
            case 'p': case 'P': {
                bool inner_negated = false;
                name = property_name(inner_negated);
                negated = (c == 'P') != inner_negated;
                std::vector<CodePointRange> probe;
                if (!unicode_class_ranges(name, probe)) {
                    // A script or other property we have no oracle table for: PCRE2's own.
                    out_ += negated ? "\\P{" : "\\p{";
                    out_ += name + "}";
                    return;
                }
                break;
            }
            case 'u':
                if (i_ + 4 <= p_.size() && is_hex_digit(p_[i_]) && is_hex_digit(p_[i_ + 1]) &&
                    is_hex_digit(p_[i_ + 2]) && is_hex_digit(p_[i_ + 3])) {
                    out_ += "\\x{" + std::string(p_.substr(i_, 4)) + "}";
                    i_ += 4;
                    return;
                }
                unsupported("\\u without four hex digits");
            default:
                out_.append(p_.substr(start, i_ - start));
                // Copy the rest of a multi-byte character after a backslash.
                while (i_ < p_.size() && (static_cast<unsigned char>(p_[i_]) & 0xC0) == 0x80) out_ += p_[i_++];
                return;
        }
        std::string negated_member;
        const std::string body = oracle_class_body(name, &negated_member);
        if (in_class) {
            if (!negated) {
                out_ += body;
            } else if (!negated_member.empty()) {
                out_ += negated_member;
            } else {
                unsupported("a negated class escape inside a character class");
            }
        } else {
            out_ += negated ? "[^" : "[";
            out_ += body + "]";
        }
    }

    void character_class() {
        out_ += '[';
        ++i_;
        if (i_ < p_.size() && p_[i_] == '^') {
            out_ += '^';
            ++i_;
        }
        if (i_ < p_.size() && p_[i_] == ']') {
            out_ += "\\]";
            ++i_;
        }
        while (true) {
            if (i_ >= p_.size()) unsupported("an unterminated character class");
            const char c = p_[i_];
            if (c == ']') {
                out_ += ']';
                ++i_;
                return;
            }
            if (c == '\\') {
                escape(true);
            } else if (c == '[') {
                unsupported(p_.substr(i_, 2) == "[:" ? "a POSIX bracket class" : "a nested character class");
            } else if (c == '&' && i_ + 1 < p_.size() && p_[i_ + 1] == '&') {
                unsupported("character class intersection (&&)");
            } else {
                out_ += c;
                ++i_;
            }
        }
    }

    // "(?imx-imx)" or "(?imx-imx:": Ruby's m (dot matches newline) is PCRE2's s.
    void group_flags() {
        std::size_t j = i_ + 2;
        while (j < p_.size() && (p_[j] == 'i' || p_[j] == 'm' || p_[j] == 'x' || p_[j] == '-')) ++j;
        if (j == i_ + 2 || j >= p_.size() || (p_[j] != ')' && p_[j] != ':')) {
            out_ += "(?";
            i_ += 2;
            return;
        }
        out_ += "(?";
        for (std::size_t k = i_ + 2; k < j; ++k) out_ += p_[k] == 'm' ? 's' : p_[k];
        i_ = j;
    }

    std::string_view p_;
    std::size_t i_ = 0;
    std::string out_;
};

}  // namespace

std::string oracle_class_body(std::string_view name, std::string* negated_member) {
    static std::mutex mutex;
    static std::map<std::string, ClassBody, std::less<>> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(std::string(name), compute_class_body(name)).first;
    if (negated_member != nullptr) *negated_member = it->second.negated_member;
    return it->second.body;
}

std::string translate_oniguruma_pattern(std::string_view pattern) { return Translator(pattern).run(); }

Regex::Regex(std::string_view oniguruma_pattern, bool allow_fast_path) : pattern_(oniguruma_pattern) {
    pcre2_pattern_ = translate_oniguruma_pattern(pattern_);
    compile();
    // MSA_FORCE_SCALAR (any value but "0", as for the kernels' dispatch) also turns off the hand-written matchers.
    if (allow_fast_path && !env_flag("MSA_FORCE_SCALAR")) fast_ = detect_fast_pattern(pattern_);
}

Regex Regex::literal(std::string_view text) {
    Regex regex;
    regex.pattern_ = std::string(text);
    // \Q...\E quotes everything except a literal "\E", which we split around.
    std::string quoted;
    std::size_t pos = 0;
    while (true) {
        const std::size_t e = text.find("\\E", pos);
        quoted += "\\Q" + std::string(text.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos)) +
                  "\\E";
        if (e == std::string_view::npos) break;
        quoted += "\\\\E";
        pos = e + 2;
    }
    regex.pcre2_pattern_ = quoted;
    regex.compile();
    return regex;
}

void Regex::compile() {
    pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
    pcre2_set_newline(context, PCRE2_NEWLINE_LF);
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern_.data()), pcre2_pattern_.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, context);
    pcre2_compile_context_free(context);
    MSA_CHECK(code_ != nullptr, "regex pattern '{}' does not compile: {} (at offset {} of the translated pattern '{}')",
              pattern_, pcre2_error_message(error), offset, pcre2_pattern_);
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      pcre2_pattern_(std::move(other.pcre2_pattern_)),
      code_(other.code_),
      jit_(other.jit_),
      fast_(other.fast_) {
    other.code_ = nullptr;
}

Regex& Regex::operator=(Regex&& other) noexcept {
    if (this != &other) {
        pcre2_code_free(code_);
        pattern_ = std::move(other.pattern_);
        pcre2_pattern_ = std::move(other.pcre2_pattern_);
        code_ = other.code_;
        jit_ = other.jit_;
        fast_ = other.fast_;
        other.code_ = nullptr;
    }
    return *this;
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view text, std::size_t start, std::size_t& match_begin, std::size_t& match_end) const {
    if (fast_ != FastPattern::kNone) {
        const FastResult result = fast_find(fast_, text, start, match_begin, match_end);
        if (result == FastResult::kMatch) return true;
        if (result == FastResult::kNoMatch) return false;
    }
    ThreadMatchState& state = thread_match_state();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), start, 0, state.match_data, nullptr)
                  : pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.match_data, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_jit_match(code_, subject, text.size(), start, 0, state.match_data, state.large_stack_context());
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    MSA_CHECK(rc >= 0, "regex pattern '{}' failed on a {}-byte input: {}", pattern_, text.size(),
              pcre2_error_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
    match_begin = ovector[0];
    match_end = ovector[1];
    return true;
}

}  // namespace msa
