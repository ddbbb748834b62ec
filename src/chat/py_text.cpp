#include "chat/py_text.h"

#include "core/error.h"
#include "core/utf8_append.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace msa::pytext {

// ---- UTF-8 -------------------------------------------------------------------------------------------------------

namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes one code point at s[pos]; returns the code point and advances pos. Invalid sequences give U+FFFD and
// advance one byte.
char32_t decode_at(std::string_view s, std::size_t& pos) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    int extra = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
        extra = 1;
        cp = b0 & 0x1F;
        min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        extra = 2;
        cp = b0 & 0x0F;
        min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        extra = 3;
        cp = b0 & 0x07;
        min = 0x10000;
    } else {
        ++pos;
        return kReplacement;
    }
    if (pos + extra >= s.size()) {
        ++pos;
        return kReplacement;
    }
    for (int i = 1; i <= extra; ++i) {
        const auto b = static_cast<unsigned char>(s[pos + i]);
        if ((b & 0xC0) != 0x80) {
            ++pos;
            return kReplacement;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ++pos;
        return kReplacement;
    }
    pos += extra + 1;
    return cp;
}

// Start of the code point that ends just before byte `end` (end > 0).
std::size_t prev_start(std::string_view s, std::size_t end) {
    std::size_t p = end - 1;
    while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80 && end - p < 4) {
        --p;
    }
    return p;
}

utf8proc_category_t category(char32_t c) {
    return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
    std::size_t pos = 0;
    while (pos < s.size()) {
        const std::size_t before = pos;
        const char32_t cp = decode_at(s, pos);
        if (cp == kReplacement) {
            // A literal U+FFFD is three bytes EF BF BD; anything else decoding to it was invalid.
            if (!(pos - before == 3 && s.substr(before, 3) == "\xEF\xBF\xBD")) {
                return false;
            }
        }
    }
    return true;
}

std::u32string decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    std::size_t pos = 0;
    while (pos < s.size()) {
        out.push_back(decode_at(s, pos));
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    msa::append_utf8(out, cp);
}

std::string encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) {
        append_utf8(out, c);
    }
    return out;
}

bool is_ascii(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::size_t length(std::string_view s) {
    std::size_t n = 0;
    for (char c : s) {
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }
    return n;
}

std::size_t byte_offset(std::string_view s, std::size_t index) {
    std::size_t pos = 0;
    for (std::size_t i = 0; i < index && pos < s.size(); ++i) {
        decode_at(s, pos);
    }
    return pos;
}

std::size_t cp_index(std::string_view s, std::size_t offset) {
    return length(s.substr(0, offset));
}

// ---- Character classes -------------------------------------------------------------------------------------------

bool is_space(char32_t c) {
    if (c < 0x80) {
        return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    }
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
    if (c < 0x80) {
        return c >= 0x20 && c < 0x7F;
    }
    switch (category(c)) {
        case UTF8PROC_CATEGORY_CC:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_CS:
        case UTF8PROC_CATEGORY_CO:
        case UTF8PROC_CATEGORY_CN:
        case UTF8PROC_CATEGORY_ZL:
        case UTF8PROC_CATEGORY_ZP:
        case UTF8PROC_CATEGORY_ZS:
            return false;
        default:
            return true;
    }
}

bool is_alpha(char32_t c) {
    if (c < 0x80) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    switch (category(c)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
            return true;
        default:
            return false;
    }
}

bool is_decimal(char32_t c) {
    if (c < 0x80) {
        return c >= '0' && c <= '9';
    }
    return category(c) == UTF8PROC_CATEGORY_ND;
}

bool is_digit(char32_t c) {
    return is_decimal(c);
}

bool is_numeric(char32_t c) {
    if (c < 0x80) {
        return c >= '0' && c <= '9';
    }
    const auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_alnum(char32_t c) {
    return is_alpha(c) || is_numeric(c);
}

bool is_lower(char32_t c) {
    if (c < 0x80) {
        return c >= 'a' && c <= 'z';
    }
    return category(c) == UTF8PROC_CATEGORY_LL;
}

bool is_upper(char32_t c) {
    if (c < 0x80) {
        return c >= 'A' && c <= 'Z';
    }
    return category(c) == UTF8PROC_CATEGORY_LU;
}

bool is_title(char32_t c) {
    return c >= 0x80 && category(c) == UTF8PROC_CATEGORY_LT;
}

bool is_cased(char32_t c) {
    return is_lower(c) || is_upper(c) || is_title(c);
}

char32_t to_lower(char32_t c) {
    if (c < 0x80) {
        return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    }
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_upper(char32_t c) {
    if (c < 0x80) {
        return (c >= 'a' && c <= 'z') ? c - 32 : c;
    }
    return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_title(char32_t c) {
    if (c < 0x80) {
        return to_upper(c);
    }
    return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

// ---- Whole-string methods ------------------------------------------------------------------------------------------

namespace {

// Python's full case mappings (Unicode SpecialCasing.txt, unconditional part) where they differ from the one-to-one
// mappings: ß -> "SS", the Latin ligatures, İ -> "i̇", ŉ, ǰ, և. Greek iota-subscript forms are not included.
struct SpecialCase {
    char32_t c;
    const char* lower;
    const char* title;
    const char* upper;
};
constexpr SpecialCase kSpecialCases[] = {
    {0x00DF, "\xC3\x9F", "Ss", "SS"},
    {0x0130, "i\xCC\x87", "\xC4\xB0", "\xC4\xB0"},
    {0x0149, "\xC5\x89", "\xCA\xBCN", "\xCA\xBCN"},
    {0x01F0, "\xC7\xB0", "J\xCC\x8C", "J\xCC\x8C"},
    {0x0587, "\xD6\x87", "\xD4\xB5\xD6\x82", "\xD4\xB5\xD5\x92"},
    {0xFB00, "\xEF\xAC\x80", "Ff", "FF"},
    {0xFB01, "\xEF\xAC\x81", "Fi", "FI"},
    {0xFB02, "\xEF\xAC\x82", "Fl", "FL"},
    {0xFB03, "\xEF\xAC\x83", "Ffi", "FFI"},
    {0xFB04, "\xEF\xAC\x84", "Ffl", "FFL"},
    {0xFB05, "\xEF\xAC\x85", "St", "ST"},
    {0xFB06, "\xEF\xAC\x86", "St", "ST"},
};

enum class Case { kLower, kTitle, kUpper };

void append_case(std::string& out, char32_t c, Case which) {
    if (c >= 0xDF) {
        for (const auto& sc : kSpecialCases) {
            if (sc.c == c) {
                out += which == Case::kLower ? sc.lower : (which == Case::kTitle ? sc.title : sc.upper);
                return;
            }
        }
    }
    append_utf8(out, which == Case::kLower ? to_lower(c) : (which == Case::kTitle ? to_title(c) : to_upper(c)));
}

bool case_ignorable(char32_t c) {
    if (c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xB7 || c == 0x2019) {
        return true;
    }
    if (c < 0x80) {
        return false;
    }
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_SK:
            return true;
        default:
            return false;
    }
}

// Lower-cases cps[i], applying Python's final-sigma rule to capital sigma.
void append_lower_at(std::string& out, const std::u32string& cps, std::size_t i) {
    if (cps[i] != 0x03A3) {
        append_case(out, cps[i], Case::kLower);
        return;
    }
    bool cased_before = false;
    for (std::size_t j = i; j-- > 0;) {
        if (!case_ignorable(cps[j])) {
            cased_before = is_cased(cps[j]);
            break;
        }
    }
    bool cased_after = false;
    for (std::size_t j = i + 1; j < cps.size(); ++j) {
        if (!case_ignorable(cps[j])) {
            cased_after = is_cased(cps[j]);
            break;
        }
    }
    append_utf8(out, cased_before && !cased_after ? U'\u03C2' : U'\u03C3');
}

}  // namespace

std::string lower(std::string_view s) {
    if (is_ascii(s)) {
        std::string out(s);
        for (char& c : out) {
            c = static_cast<char>(to_lower(static_cast<unsigned char>(c)));
        }
        return out;
    }
    const std::u32string cps = decode(s);
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < cps.size(); ++i) {
        append_lower_at(out, cps, i);
    }
    return out;
}

std::string upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    std::size_t pos = 0;
    while (pos < s.size()) {
        append_case(out, decode_at(s, pos), Case::kUpper);
    }
    return out;
}

std::string swapcase(std::string_view s) {
    const std::u32string cps = decode(s);
    std::string out;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        if (is_upper(cps[i])) {
            append_lower_at(out, cps, i);
        } else if (is_lower(cps[i])) {
            append_case(out, cps[i], Case::kUpper);
        } else {
            append_utf8(out, cps[i]);
        }
    }
    return out;
}

std::string capitalize(std::string_view s) {
    const std::u32string cps = decode(s);
    std::string out;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        if (i == 0) {
            append_case(out, cps[i], Case::kTitle);
        } else {
            append_lower_at(out, cps, i);
        }
    }
    return out;
}

std::string title(std::string_view s) {
    const std::u32string cps = decode(s);
    std::string out;
    bool previous_cased = false;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        if (previous_cased) {
            append_lower_at(out, cps, i);
        } else {
            append_case(out, cps[i], Case::kTitle);
        }
        previous_cased = is_cased(cps[i]);
    }
    return out;
}

bool str_islower(std::string_view s) {
    bool cased = false;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const char32_t c = decode_at(s, pos);
        if (is_upper(c) || is_title(c)) {
            return false;
        }
        cased = cased || is_lower(c);
    }
    return cased;
}

bool str_isupper(std::string_view s) {
    bool cased = false;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const char32_t c = decode_at(s, pos);
        if (is_lower(c) || is_title(c)) {
            return false;
        }
        cased = cased || is_upper(c);
    }
    return cased;
}

bool str_istitle(std::string_view s) {
    bool cased = false;
    bool previous_cased = false;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const char32_t c = decode_at(s, pos);
        if (is_upper(c) || is_title(c)) {
            if (previous_cased) {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else if (is_lower(c)) {
            if (!previous_cased) {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else {
            previous_cased = false;
        }
    }
    return cased;
}

bool all_chars(std::string_view s, bool (*pred)(char32_t)) {
    if (s.empty()) {
        return false;
    }
    std::size_t pos = 0;
    while (pos < s.size()) {
        if (!pred(decode_at(s, pos))) {
            return false;
        }
    }
    return true;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, StripSide side) {
    std::u32string set;
    if (chars) {
        set = decode(*chars);
    }
    auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
    std::size_t begin = 0;
    std::size_t end = s.size();
    if (side != StripSide::kRight) {
        while (begin < end) {
            std::size_t next = begin;
            if (!strippable(decode_at(s, next))) {
                break;
            }
            begin = next;
        }
    }
    if (side != StripSide::kLeft) {
        while (end > begin) {
            const std::size_t start = prev_start(s, end);
            std::size_t tmp = start;
            if (!strippable(decode_at(s, tmp))) {
                break;
            }
            end = start;
        }
    }
    return std::string(s.substr(begin, end - begin));
}

namespace {

// Whitespace-run splitting from the left (Python str.split(None, maxsplit)).
std::vector<std::string> split_whitespace(std::string_view s, std::int64_t maxsplit) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    auto skip_space = [&]() {
        while (pos < s.size()) {
            std::size_t next = pos;
            if (!is_space(decode_at(s, next))) {
                break;
            }
            pos = next;
        }
    };
    skip_space();
    while (pos < s.size()) {
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
            out.emplace_back(s.substr(pos));
            return out;
        }
        const std::size_t start = pos;
        while (pos < s.size()) {
            std::size_t next = pos;
            if (is_space(decode_at(s, next))) {
                break;
            }
            pos = next;
        }
        out.emplace_back(s.substr(start, pos - start));
        skip_space();
    }
    return out;
}

std::vector<std::string> rsplit_whitespace(std::string_view s, std::int64_t maxsplit) {
    std::vector<std::string> out;
    std::size_t end = s.size();
    auto space_before = [&](std::size_t at, std::size_t& start) {
        start = prev_start(s, at);
        std::size_t tmp = start;
        return is_space(decode_at(s, tmp));
    };
    auto skip_space = [&]() {
        std::size_t start = 0;
        while (end > 0 && space_before(end, start)) {
            end = start;
        }
    };
    skip_space();
    while (end > 0) {
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
            out.emplace_back(s.substr(0, end));
            break;
        }
        const std::size_t stop = end;
        std::size_t start = 0;
        while (end > 0 && !space_before(end, start)) {
            end = start;
        }
        out.emplace_back(s.substr(end, stop - end));
        skip_space();
    }
    std::reverse(out.begin(), out.end());
    return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
    if (!sep) {
        return split_whitespace(s, maxsplit);
    }
    MSA_CHECK(!sep->empty(), "empty separator");
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (true) {
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
            break;
        }
        const std::size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) {
            break;
        }
        out.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
    if (!sep) {
        return rsplit_whitespace(s, maxsplit);
    }
    MSA_CHECK(!sep->empty(), "empty separator");
    std::vector<std::string> out;
    std::size_t end = s.size();
    while (true) {
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
            break;
        }
        if (end < sep->size()) {
            break;
        }
        const std::size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string_view::npos) {
            break;
        }
        out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    std::size_t line_start = 0;
    while (pos < s.size()) {
        const std::size_t at = pos;
        const char32_t c = decode_at(s, pos);
        const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                         c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) {
            continue;
        }
        if (c == '\r' && pos < s.size() && s[pos] == '\n') {
            ++pos;
        }
        out.emplace_back(s.substr(line_start, (keepends ? pos : at) - line_start));
        line_start = pos;
    }
    if (line_start < s.size()) {
        out.emplace_back(s.substr(line_start));
    }
    return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count,
                    std::size_t max_bytes) {
    std::string out;
    auto append = [&](std::string_view piece) {
        MSA_CHECK(out.size() + piece.size() <= max_bytes, "string result exceeds the limit of {} bytes", max_bytes);
        out.append(piece);
    };
    std::int64_t done = 0;
    if (old.empty()) {
        std::size_t pos = 0;
        while (pos < s.size() && (count < 0 || done < count)) {
            append(repl);
            const std::size_t start = pos;
            decode_at(s, pos);
            append(s.substr(start, pos - start));
            ++done;
        }
        if (pos == s.size() && (count < 0 || done < count)) {
            append(repl);
        }
        append(s.substr(pos));
        return out;
    }
    std::size_t pos = 0;
    while (count < 0 || done < count) {
        const std::size_t hit = s.find(old, pos);
        if (hit == std::string_view::npos) {
            break;
        }
        append(s.substr(pos, hit - pos));
        append(repl);
        pos = hit + old.size();
        ++done;
    }
    append(s.substr(pos));
    return out;
}

std::int64_t find(std::string_view s, std::string_view sub) {
    const std::size_t hit = s.find(sub);
    return hit == std::string_view::npos ? -1 : static_cast<std::int64_t>(cp_index(s, hit));
}

std::int64_t rfind(std::string_view s, std::string_view sub) {
    const std::size_t hit = s.rfind(sub);
    return hit == std::string_view::npos ? -1 : static_cast<std::int64_t>(cp_index(s, hit));
}

std::int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) {
        return static_cast<std::int64_t>(length(s)) + 1;
    }
    std::int64_t n = 0;
    std::size_t pos = 0;
    while ((pos = s.find(sub, pos)) != std::string_view::npos) {
        ++n;
        pos += sub.size();
    }
    return n;
}

std::string pad(std::string_view s, std::int64_t width, char32_t fill, char align) {
    const auto len = static_cast<std::int64_t>(length(s));
    if (width <= len) {
        return std::string(s);
    }
    const std::int64_t margin = width - len;
    std::int64_t left = 0;
    if (align == '>') {
        left = margin;
    } else if (align == '^') {
        left = margin / 2 + (margin & width & 1);
    }
    const std::int64_t right = margin - left;
    std::string out;
    for (std::int64_t i = 0; i < left; ++i) {
        append_utf8(out, fill);
    }
    out.append(s);
    for (std::int64_t i = 0; i < right; ++i) {
        append_utf8(out, fill);
    }
    return out;
}

std::string zfill(std::string_view s, std::int64_t width) {
    const auto len = static_cast<std::int64_t>(length(s));
    if (width <= len) {
        return std::string(s);
    }
    std::string out;
    std::string_view rest = s;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        out.push_back(s[0]);
        rest = s.substr(1);
    }
    out.append(static_cast<std::size_t>(width - len), '0');
    out.append(rest);
    return out;
}

// ---- repr ------------------------------------------------------------------------------------------------------

std::string repr(std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out;
    out.reserve(s.size() + 2);
    out.push_back(quote);
    static const char* hex = "0123456789abcdef";
    std::size_t pos = 0;
    while (pos < s.size()) {
        const char32_t c = decode_at(s, pos);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7F) {
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else if (c < 0x7F || is_printable(c)) {
            append_utf8(out, c);
        } else {
            int digits = 0;
            if (c <= 0xFF) {
                out += "\\x";
                digits = 2;
            } else if (c <= 0xFFFF) {
                out += "\\u";
                digits = 4;
            } else {
                out += "\\U";
                digits = 8;
            }
            for (int i = digits - 1; i >= 0; --i) {
                out.push_back(hex[(c >> (4 * i)) & 15]);
            }
        }
    }
    out.push_back(quote);
    return out;
}

// ---- numbers ----------------------------------------------------------------------------------------------------

std::string int_repr(std::int64_t v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    return std::string(buf, r.ptr);
}

std::string float_repr(double v) {
    if (std::isnan(v)) {
        return "nan";
    }
    if (std::isinf(v)) {
        return v > 0 ? "inf" : "-inf";
    }
    if (v == 0.0) {
        return std::signbit(v) ? "-0.0" : "0.0";
    }
    // Shortest round-trip digits, then Python's layout rules (repr uses exponent form when the decimal point
    // position is <= -4 or > 16).
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
    std::string out;
    std::size_t i = 0;
    if (sci[0] == '-') {
        out.push_back('-');
        i = 1;
    }
    const std::size_t e = sci.find('e');
    std::string digits;
    for (std::size_t k = i; k < e; ++k) {
        if (sci[k] != '.') {
            digits.push_back(sci[k]);
        }
    }
    int exponent = 0;
    std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exponent);
    const int decpt = exponent + 1;
    if (decpt <= -4 || decpt > 16) {
        out.push_back(digits[0]);
        if (digits.size() > 1) {
            out.push_back('.');
            out.append(digits, 1, std::string::npos);
        }
        out.push_back('e');
        out.push_back(exponent < 0 ? '-' : '+');
        const int mag = exponent < 0 ? -exponent : exponent;
        if (mag < 10) {
            out.push_back('0');
        }
        out += std::to_string(mag);
    } else if (decpt <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-decpt), '0');
        out += digits;
    } else if (static_cast<std::size_t>(decpt) >= digits.size()) {
        out += digits;
        out.append(static_cast<std::size_t>(decpt) - digits.size(), '0');
        out += ".0";
    } else {
        out.append(digits, 0, static_cast<std::size_t>(decpt));
        out.push_back('.');
        out.append(digits, static_cast<std::size_t>(decpt), std::string::npos);
    }
    return out;
}

namespace {

int digit_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'Z') {
        return c - 'A' + 10;
    }
    return 99;
}

// Removes Python whitespace around s (ASCII fast path, Unicode through strip()).
std::string trimmed(std::string_view s) {
    return strip(s, std::nullopt, StripSide::kBoth);
}

}  // namespace

std::optional<std::int64_t> parse_int(std::string_view text, int base) {
    const std::string s = trimmed(text);
    if (base != 0 && (base < 2 || base > 36)) {
        return std::nullopt;
    }
    std::size_t i = 0;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        negative = s[i] == '-';
        ++i;
    }
    auto has_prefix = [&](char lower) {
        return i + 1 < s.size() && s[i] == '0' && (s[i + 1] == lower || s[i + 1] == lower - 32);
    };
    bool prefixed = false;
    if (base == 0) {
        if (has_prefix('x')) {
            base = 16;
            prefixed = true;
        } else if (has_prefix('o')) {
            base = 8;
            prefixed = true;
        } else if (has_prefix('b')) {
            base = 2;
            prefixed = true;
        } else {
            base = 10;
            // Base 0 forbids leading zeros on non-zero decimals ("010").
            bool nonzero = false;
            for (std::size_t k = i; k < s.size(); ++k) {
                nonzero = nonzero || (s[k] != '0' && s[k] != '_');
            }
            if (i + 1 < s.size() && s[i] == '0' && nonzero) {
                return std::nullopt;
            }
        }
    } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) || (base == 2 && has_prefix('b'))) {
        prefixed = true;
    }
    if (prefixed) {
        i += 2;
        if (i < s.size() && s[i] == '_') {
            ++i;  // one underscore may follow the prefix
        }
    }
    if (i >= s.size()) {
        return std::nullopt;
    }
    constexpr std::uint64_t kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1;
    std::uint64_t acc = 0;
    bool last_underscore = true;
    for (; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (last_underscore) {
                return std::nullopt;
            }
            last_underscore = true;
            continue;
        }
        const int d = digit_value(s[i]);
        if (d >= base) {
            return std::nullopt;
        }
        if (__builtin_mul_overflow(acc, static_cast<std::uint64_t>(base), &acc) ||
            __builtin_add_overflow(acc, static_cast<std::uint64_t>(d), &acc) || acc > kLimit) {
            return std::nullopt;
        }
        last_underscore = false;
    }
    if (last_underscore) {
        return std::nullopt;
    }
    if (negative) {
        return acc == kLimit ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(acc);
    }
    if (acc == kLimit) {
        return std::nullopt;
    }
    return static_cast<std::int64_t>(acc);
}

std::optional<double> parse_float(std::string_view text) {
    const std::string s = trimmed(text);
    std::size_t i = 0;
    std::string clean;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        clean.push_back(s[i]);
        ++i;
    }
    std::string rest = lower(std::string_view(s).substr(i));
    if (rest == "inf" || rest == "infinity") {
        return clean == "-" ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    if (rest == "nan") {
        return std::numeric_limits<double>::quiet_NaN();
    }
    // digits with single underscores between digits: int-part [. frac-part] [e [sign] digits]
    auto take_digits = [&](bool& any) {
        bool last_digit = false;
        while (i < s.size()) {
            if (s[i] >= '0' && s[i] <= '9') {
                clean.push_back(s[i]);
                last_digit = true;
                any = true;
            } else if (s[i] == '_' && last_digit && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
                last_digit = false;
            } else {
                break;
            }
            ++i;
        }
    };
    bool int_digits = false;
    bool frac_digits = false;
    take_digits(int_digits);
    if (i < s.size() && s[i] == '.') {
        clean.push_back('.');
        ++i;
        take_digits(frac_digits);
    }
    if (!int_digits && !frac_digits) {
        return std::nullopt;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        clean.push_back('e');
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
            clean.push_back(s[i]);
            ++i;
        }
        bool exp_digits = false;
        take_digits(exp_digits);
        if (!exp_digits) {
            return std::nullopt;
        }
    }
    if (i != s.size()) {
        return std::nullopt;
    }
    const bool negative = !clean.empty() && clean[0] == '-';
    const std::size_t skip = (!clean.empty() && (clean[0] == '-' || clean[0] == '+')) ? 1 : 0;
    double value = 0.0;
    const auto r = std::from_chars(clean.data() + skip, clean.data() + clean.size(), value);
    if (r.ec == std::errc::result_out_of_range) {
        // Python gives inf for overflow and 0.0 for underflow; from_chars leaves value untouched then.
        const std::size_t epos = clean.find('e');
        const bool tiny = epos != std::string::npos && clean[epos + 1] == '-';
        value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    }
    return negative ? -value : value;
}

}  // namespace msa::pytext
