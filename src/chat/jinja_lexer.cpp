#include "chat/jinja_lexer.h"

#include "chat/jinja_error.h"
#include "chat/py_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

namespace msa::jinja {

namespace {

// Joins lines with "\n" whatever their original line break, and drops one trailing newline (jinja2 does this
// before tokenizing).
std::string normalize_newlines(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') {
                ++i;
            }
        } else {
            out.push_back(source[i]);
        }
    }
    if (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

bool is_identifier_char(char32_t c, bool first) {
    if (c < 0x80) {
        return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
    }
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_NL:
            return true;
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_PC:
            return !first;
        default:
            return false;
    }
}

bool is_ascii_digit(char c) {
    return c >= '0' && c <= '9';
}

class Lexer {
public:
    explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
        line_starts_.push_back(0);
        for (std::size_t i = 0; i < src_.size(); ++i) {
            if (src_[i] == '\n') {
                line_starts_.push_back(i + 1);
            }
        }
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            const std::size_t tag = find_tag_start(pos_);
            if (tag == std::string::npos) {
                emit_data(src_.substr(pos_), pos_);
                pos_ = src_.size();
                break;
            }
            const char kind = src_[tag + 1];
            const char sign = (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) ? src_[tag + 2]
                                                                                                         : '\0';
            std::string_view text(src_.data() + pos_, tag - pos_);
            std::size_t raw_end = 0;
            const bool raw = kind == '%' && match_raw_begin(tag, raw_end);
            text = control_leading_whitespace(text, sign, kind != '{');
            emit_data(text, pos_);
            line_starting_ = false;
            if (raw) {
                line_starting_ = raw_end > 0 && src_[raw_end - 1] == '\n';
                pos_ = raw_end;
                lex_raw_body();
                continue;
            }
            pos_ = tag + 2 + (sign ? 1 : 0);
            if (kind == '#') {
                lex_comment(tag);
            } else {
                lex_tag(kind == '{', tag);
            }
        }
        Token eof;
        eof.type = TokenType::kEof;
        set_position(eof, src_.size());
        tokens_.push_back(std::move(eof));
        return std::move(tokens_);
    }

private:
    [[noreturn]] void fail(std::size_t at, const std::string& message) const {
        int line = 0;
        int column = 0;
        position(at, line, column);
        throw TemplateError(message, line, column);
    }

    void position(std::size_t at, int& line, int& column) const {
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
        const std::size_t line_index = static_cast<std::size_t>(it - line_starts_.begin()) - 1;
        line = static_cast<int>(line_index) + 1;
        const std::size_t start = line_starts_[line_index];
        // Columns count code points. Tokens come in source order, so continue from the previous position on the
        // same line instead of recounting from the line start (that was quadratic on long one-line templates).
        if (column_cache_.line_index != line_index || column_cache_.at > at) {
            column_cache_ = {line_index, start, 0};
        }
        column_cache_.column += pytext::length(std::string_view(src_).substr(column_cache_.at, at - column_cache_.at));
        column_cache_.at = at;
        column = static_cast<int>(column_cache_.column) + 1;
    }

    void set_position(Token& token, std::size_t at) const { position(at, token.line, token.column); }

    std::size_t find_tag_start(std::size_t from) const {
        std::size_t p = from;
        while ((p = src_.find('{', p)) != std::string::npos) {
            if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
                return p;
            }
            ++p;
        }
        return std::string::npos;
    }

    // Length of the run of Unicode whitespace at `at` (Python regex \s*).
    std::size_t whitespace_run(std::size_t at) const {
        std::size_t p = at;
        while (p < src_.size()) {
            std::size_t next = p;
            const std::u32string cp =
                pytext::decode(std::string_view(src_).substr(p, std::min<std::size_t>(4, src_.size() - p)));
            if (cp.empty() || !pytext::is_space(cp[0])) {
                break;
            }
            std::string enc;
            pytext::append_utf8(enc, cp[0]);
            next += enc.size();
            p = next;
        }
        return p - at;
    }

    bool starts_with(std::size_t at, std::string_view s) const {
        return src_.compare(at, s.size(), s) == 0;
    }

    // {% [-+]? \s* raw \s* (-%} \s* | %})  -- the raw block's opening tag gets no trim_blocks newline removal.
    bool match_raw_begin(std::size_t tag, std::size_t& end) const {
        std::size_t p = tag + 2;
        if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
            ++p;
        }
        p += whitespace_run(p);
        if (!starts_with(p, "raw")) {
            return false;
        }
        p += 3;
        p += whitespace_run(p);
        if (starts_with(p, "-%}")) {
            p += 3;
            end = p + whitespace_run(p);
            return true;
        }
        if (starts_with(p, "%}")) {
            end = p + 2;
            return true;
        }
        return false;
    }

    // Applies `-` (strip all whitespace before the tag) or lstrip_blocks (strip spaces before a block or comment
    // tag that starts a line) to the text preceding a tag.
    std::string_view control_leading_whitespace(std::string_view text, char sign, bool lstrip_allowed) const {
        if (sign == '-') {
            const std::string stripped = pytext::strip(text, std::nullopt, pytext::StripSide::kRight);
            return text.substr(0, stripped.size());
        }
        if (sign == '+' || !lstrip_allowed) {
            return text;
        }
        const std::size_t nl = text.rfind('\n');
        const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if (l_pos == 0 && !line_starting_) {
            return text;
        }
        const std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && pytext::strip(tail, std::nullopt, pytext::StripSide::kLeft).empty()) {
            return text.substr(0, l_pos);
        }
        return text;
    }

    void emit_data(std::string_view text, std::size_t at) {
        if (text.empty()) {
            return;
        }
        Token t;
        t.type = TokenType::kData;
        t.text = std::string(text);
        set_position(t, at);
        tokens_.push_back(std::move(t));
    }

    // Matches a closing delimiter `close` ("%}", "}}", "#}") at p: `+close` (no trim), `-close\s*`, or
    // `close` followed by one optional newline when `trim` (trim_blocks). Returns the end, or npos.
    std::size_t match_end(std::size_t p, std::string_view close, bool trim, bool plus_allowed) const {
        if (plus_allowed && src_[p] == '+' && starts_with(p + 1, close)) {
            return p + 1 + close.size();
        }
        if (src_[p] == '-' && starts_with(p + 1, close)) {
            const std::size_t e = p + 1 + close.size();
            return e + whitespace_run(e);
        }
        if (starts_with(p, close)) {
            std::size_t e = p + close.size();
            if (trim && e < src_.size() && src_[e] == '\n') {
                ++e;
            }
            return e;
        }
        return std::string::npos;
    }

    void lex_comment(std::size_t tag) {
        const std::size_t body = pos_;
        std::size_t p = body;
        while (true) {
            p = src_.find("#}", p);
            if (p == std::string::npos) {
                fail(tag, "Missing end of comment tag");
            }
            std::size_t start = p;
            if (p > body && (src_[p - 1] == '-' || src_[p - 1] == '+')) {
                start = p - 1;
            }
            const std::size_t end = match_end(start, "#}", true, true);
            pos_ = end;
            line_starting_ = src_[end - 1] == '\n';
            return;
        }
    }

    void lex_raw_body() {
        std::size_t p = pos_;
        while ((p = src_.find("{%", p)) != std::string::npos) {
            std::size_t q = p + 2;
            char sign = '\0';
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) {
                sign = src_[q];
                ++q;
            }
            q += whitespace_run(q);
            if (starts_with(q, "endraw")) {
                q += 6;
                q += whitespace_run(q);
                const std::size_t end = q < src_.size() ? match_end(q, "%}", true, true) : std::string::npos;
                if (end != std::string::npos) {
                    const std::string_view body(src_.data() + pos_, p - pos_);
                    emit_data(control_leading_whitespace(body, sign, true), pos_);
                    pos_ = end;
                    line_starting_ = src_[end - 1] == '\n';
                    return;
                }
            }
            p += 2;
        }
        fail(pos_, "Missing end of raw directive");
    }

    void lex_tag(bool variable, std::size_t tag) {
        Token begin;
        begin.type = variable ? TokenType::kVariableBegin : TokenType::kBlockBegin;
        set_position(begin, tag);
        tokens_.push_back(std::move(begin));
        std::vector<char> balance;
        while (true) {
            if (pos_ >= src_.size()) {
                fail(tag, variable ? "unexpected end of template, expected end of print statement ('}}')"
                                   : "unexpected end of template, expected end of statement block ('%}')");
            }
            if (balance.empty()) {
                const std::size_t end = variable ? match_end(pos_, "}}", false, false) : match_end(pos_, "%}", true, true);
                if (end != std::string::npos) {
                    Token t;
                    t.type = variable ? TokenType::kVariableEnd : TokenType::kBlockEnd;
                    set_position(t, pos_);
                    tokens_.push_back(std::move(t));
                    pos_ = end;
                    line_starting_ = src_[end - 1] == '\n';
                    return;
                }
            }
            const std::size_t ws = whitespace_run(pos_);
            if (ws > 0) {
                pos_ += ws;
                continue;
            }
            if (lex_number() || lex_name() || lex_string()) {
                continue;
            }
            lex_operator(balance);
        }
    }

    // Python float_re / integer_re (ASCII digits).
    bool lex_number() {
        const std::size_t start = pos_;
        if (!is_ascii_digit(src_[start])) {
            return false;
        }
        // Digits possibly separated by single underscores: (\d+_)*\d+
        auto digit_run = [&](std::size_t p) -> std::size_t {
            if (p >= src_.size() || !is_ascii_digit(src_[p])) {
                return std::string::npos;
            }
            while (true) {
                while (p < src_.size() && is_ascii_digit(src_[p])) {
                    ++p;
                }
                if (p + 1 < src_.size() && src_[p] == '_' && is_ascii_digit(src_[p + 1])) {
                    ++p;
                    continue;
                }
                return p;
            }
        };
        auto exponent = [&](std::size_t p) -> std::size_t {
            if (p >= src_.size() || (src_[p] != 'e' && src_[p] != 'E')) {
                return std::string::npos;
            }
            ++p;
            if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) {
                ++p;
            }
            return digit_run(p);
        };
        const bool after_dot = start > 0 && src_[start - 1] == '.';
        if (!after_dot) {
            const std::size_t int_end = digit_run(start);
            std::size_t float_end = std::string::npos;
            std::size_t frac_end = std::string::npos;
            if (int_end < src_.size() && src_[int_end] == '.') {
                frac_end = digit_run(int_end + 1);
            }
            // (\.digits)? e... | \.digits
            if (frac_end != std::string::npos) {
                const std::size_t e = exponent(frac_end);
                float_end = e != std::string::npos ? e : frac_end;
            } else {
                float_end = exponent(int_end);
            }
            if (float_end != std::string::npos) {
                std::string clean;
                for (std::size_t i = start; i < float_end; ++i) {
                    if (src_[i] != '_') {
                        clean.push_back(src_[i]);
                    }
                }
                double value = 0.0;
                const auto r = std::from_chars(clean.data(), clean.data() + clean.size(), value);
                if (r.ec == std::errc::result_out_of_range) {
                    const std::size_t epos = clean.find_first_of("eE");
                    const bool tiny = epos != std::string::npos && clean[epos + 1] == '-';
                    value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
                }
                Token t;
                t.type = TokenType::kFloat;
                t.float_value = value;
                t.text = src_.substr(start, float_end - start);
                set_position(t, start);
                tokens_.push_back(std::move(t));
                pos_ = float_end;
                return true;
            }
        }
        // Integers: 0b / 0o / 0x prefixes, [1-9](_?\d)*, 0(_?0)*
        int base = 10;
        std::size_t p = start;
        if (src_[p] == '0' && p + 1 < src_.size()) {
            const char x = static_cast<char>(src_[p + 1] | 0x20);
            if (x == 'b' || x == 'o' || x == 'x') {
                base = x == 'b' ? 2 : (x == 'o' ? 8 : 16);
            }
        }
        auto is_base_digit = [&](char c) {
            if (base == 16) {
                return is_ascii_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
            }
            return c >= '0' && c < '0' + base;
        };
        std::string digits;
        if (base != 10) {
            std::size_t q = p + 2;
            while (q < src_.size()) {
                if (src_[q] == '_' && q + 1 < src_.size() && is_base_digit(src_[q + 1])) {
                    ++q;
                    continue;
                }
                if (!is_base_digit(src_[q])) {
                    break;
                }
                digits.push_back(src_[q]);
                ++q;
            }
            if (digits.empty()) {
                base = 10;  // "0x" without digits lexes as 0 followed by a name
            } else {
                p = q;
            }
        }
        if (base == 10) {
            digits.clear();
            std::size_t q = p;
            const bool zero = src_[q] == '0';
            while (q < src_.size()) {
                if (src_[q] == '_' && q + 1 < src_.size() && (zero ? src_[q + 1] == '0' : is_ascii_digit(src_[q + 1]))) {
                    ++q;
                    continue;
                }
                if (zero ? src_[q] != '0' : !is_ascii_digit(src_[q])) {
                    break;
                }
                digits.push_back(src_[q]);
                ++q;
            }
            p = q;
        }
        std::int64_t value = 0;
        const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
        if (r.ec != std::errc()) {
            fail(start, "integer literal '" + src_.substr(start, p - start) + "' does not fit in 64 bits");
        }
        Token t;
        t.type = TokenType::kInteger;
        t.int_value = value;
        t.text = src_.substr(start, p - start);
        set_position(t, start);
        tokens_.push_back(std::move(t));
        pos_ = p;
        return true;
    }

    bool lex_name() {
        std::size_t p = pos_;
        bool first = true;
        while (p < src_.size()) {
            const std::u32string cp =
                pytext::decode(std::string_view(src_).substr(p, std::min<std::size_t>(4, src_.size() - p)));
            if (cp.empty() || !is_identifier_char(cp[0], first)) {
                break;
            }
            std::string enc;
            pytext::append_utf8(enc, cp[0]);
            p += enc.size();
            first = false;
        }
        if (p == pos_) {
            return false;
        }
        Token t;
        t.type = TokenType::kName;
        t.text = src_.substr(pos_, p - pos_);
        set_position(t, pos_);
        tokens_.push_back(std::move(t));
        pos_ = p;
        return true;
    }

    // A string literal with Python's unicode-escape rules (what jinja2 applies to string tokens).
    bool lex_string() {
        const char quote = src_[pos_];
        if (quote != '\'' && quote != '"') {
            return false;
        }
        std::size_t p = pos_ + 1;
        while (p < src_.size() && src_[p] != quote) {
            p += (src_[p] == '\\' && p + 1 < src_.size()) ? 2 : 1;
        }
        if (p >= src_.size()) {
            return false;  // unterminated: reported as an unexpected character
        }
        Token t;
        t.type = TokenType::kString;
        t.text = unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), pos_);
        set_position(t, pos_);
        tokens_.push_back(std::move(t));
        pos_ = p + 1;
        return true;
    }

    std::string unescape(std::string_view s, std::size_t at) const {
        std::string out;
        out.reserve(s.size());
        std::size_t i = 0;
        auto hex_escape = [&](std::size_t digits, const char* what) {
            char32_t cp = 0;
            for (std::size_t k = 0; k < digits; ++k) {
                const std::size_t j = i + k;
                const char c = j < s.size() ? s[j] : '\0';
                int d = -1;
                if (c >= '0' && c <= '9') {
                    d = c - '0';
                } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
                    d = (c | 0x20) - 'a' + 10;
                }
                if (d < 0) {
                    fail(at, std::string("truncated ") + what + " escape");
                }
                cp = cp * 16 + static_cast<char32_t>(d);
            }
            i += digits;
            return cp;
        };
        while (i < s.size()) {
            const char c = s[i];
            if (c != '\\') {
                out.push_back(c);
                ++i;
                continue;
            }
            ++i;
            const char e = s[i];
            ++i;
            char32_t cp = 0;
            switch (e) {
                case '\n':
                    continue;  // line continuation
                case '\\':
                case '\'':
                case '"':
                    out.push_back(e);
                    continue;
                case 'a':
                    out.push_back('\a');
                    continue;
                case 'b':
                    out.push_back('\b');
                    continue;
                case 'f':
                    out.push_back('\f');
                    continue;
                case 'n':
                    out.push_back('\n');
                    continue;
                case 'r':
                    out.push_back('\r');
                    continue;
                case 't':
                    out.push_back('\t');
                    continue;
                case 'v':
                    out.push_back('\v');
                    continue;
                case 'x':
                    cp = hex_escape(2, "\\xXX");
                    break;
                case 'u':
                    cp = hex_escape(4, "\\uXXXX");
                    break;
                case 'U':
                    cp = hex_escape(8, "\\UXXXXXXXX");
                    if (cp > 0x10FFFF) {
                        fail(at, "illegal Unicode character");
                    }
                    break;
                case 'N':
                    fail(at, "\\N{...} escapes in string literals are not supported");
                default:
                    if (e >= '0' && e <= '7') {
                        cp = static_cast<char32_t>(e - '0');
                        for (int k = 0; k < 2 && i < s.size() && s[i] >= '0' && s[i] <= '7'; ++k, ++i) {
                            cp = cp * 8 + static_cast<char32_t>(s[i] - '0');
                        }
                        break;
                    }
                    if (static_cast<unsigned char>(e) >= 0x80) {
                        // Python first rewrites non-ASCII characters as \x.. / \u.... escapes; after a lone
                        // backslash that escape's text stays literal.
                        std::size_t start = i - 1;
                        std::size_t end = start;
                        const std::u32string decoded =
                            pytext::decode(s.substr(start, std::min<std::size_t>(4, s.size() - start)));
                        std::string enc;
                        pytext::append_utf8(enc, decoded[0]);
                        end += enc.size();
                        const char32_t ch = decoded[0];
                        static const char* hex = "0123456789abcdef";
                        out += "\\";
                        const int digits = ch <= 0xFF ? 2 : (ch <= 0xFFFF ? 4 : 8);
                        out.push_back(ch <= 0xFF ? 'x' : (ch <= 0xFFFF ? 'u' : 'U'));
                        for (int k = digits - 1; k >= 0; --k) {
                            out.push_back(hex[(ch >> (4 * k)) & 15]);
                        }
                        i = end;
                        continue;
                    }
                    out.push_back('\\');
                    out.push_back(e);
                    continue;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                fail(at, "string literal contains a lone surrogate escape");
            }
            pytext::append_utf8(out, cp);
        }
        return out;
    }

    void lex_operator(std::vector<char>& balance) {
        static constexpr std::array<std::string_view, 26> kOperators = {
            "**", "//", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
            "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
        for (std::string_view op : kOperators) {
            if (!starts_with(pos_, op)) {
                continue;
            }
            if (op == "(" || op == "[" || op == "{") {
                balance.push_back(op == "(" ? ')' : (op == "[" ? ']' : '}'));
            } else if (op == ")" || op == "]" || op == "}") {
                if (balance.empty()) {
                    fail(pos_, "unexpected '" + std::string(op) + "'");
                }
                if (balance.back() != op[0]) {
                    fail(pos_, "unexpected '" + std::string(op) + "', expected '" + std::string(1, balance.back()) +
                                   "'");
                }
                balance.pop_back();
            }
            Token t;
            t.type = TokenType::kOperator;
            t.text = std::string(op);
            set_position(t, pos_);
            tokens_.push_back(std::move(t));
            pos_ += op.size();
            return;
        }
        const std::u32string cp =
            pytext::decode(std::string_view(src_).substr(pos_, std::min<std::size_t>(4, src_.size() - pos_)));
        std::string ch;
        pytext::append_utf8(ch, cp.empty() ? U'?' : cp[0]);
        fail(pos_, "unexpected char " + pytext::repr(ch));
    }

    std::string src_;
    std::vector<std::size_t> line_starts_;
    struct ColumnCache {
        std::size_t line_index = 0;
        std::size_t at = 0;      // byte offset the column below belongs to
        std::size_t column = 0;  // code points from the line start to `at`
    };
    mutable ColumnCache column_cache_;
    std::vector<Token> tokens_;
    std::size_t pos_ = 0;
    bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
    return Lexer(source).run();
}

}  // namespace msa::jinja
