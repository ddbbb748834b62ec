// Python `str` semantics over UTF-8 byte strings, as the Jinja engine needs them to match Python's jinja2:
// code-point lengths and indices, Unicode whitespace (str.isspace), case mapping, strip/split/splitlines/replace,
// repr() quoting, and the exact text of float/int repr. Character classes and one-to-one case mappings come from
// utf8proc, plus Python's full mappings for ß, the Latin ligatures, İ and final sigma; the Greek iota-subscript
// special cases are not reproduced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msa::pytext {

// ---- UTF-8 -------------------------------------------------------------------------------------------------------
// Strings reaching the engine are valid UTF-8 (checked at the boundary by is_valid_utf8); decoding is still total:
// an invalid byte decodes as U+FFFD.
bool is_valid_utf8(std::string_view s);
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
// Number of code points (Python len()).
std::size_t length(std::string_view s);
// True when every byte is ASCII (then byte indices are code-point indices).
bool is_ascii(std::string_view s);
// Byte offset of code point `index` (index <= length).
std::size_t byte_offset(std::string_view s, std::size_t index);
// Code-point index of byte offset `offset` (offset at a code-point boundary).
std::size_t cp_index(std::string_view s, std::size_t offset);

// ---- Character classes (Python str.isXXX on one character) ------------------------------------------------------
bool is_space(char32_t c);
bool is_printable(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_alnum(char32_t c);
bool is_cased(char32_t c);
bool is_lower(char32_t c);
bool is_upper(char32_t c);
bool is_title(char32_t c);
char32_t to_lower(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_title(char32_t c);

// ---- Whole-string methods (names follow Python) -----------------------------------------------------------------
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string swapcase(std::string_view s);
std::string capitalize(std::string_view s);
std::string title(std::string_view s);  // Python str.title()
bool str_islower(std::string_view s);
bool str_isupper(std::string_view s);
bool str_istitle(std::string_view s);
// Applies a per-character predicate: true when s is non-empty and every character satisfies it.
bool all_chars(std::string_view s, bool (*pred)(char32_t));

enum class StripSide { kLeft, kRight, kBoth };
// chars == nullopt strips Unicode whitespace; otherwise any code point of *chars.
std::string strip(std::string_view s, const std::optional<std::string>& chars, StripSide side);

// str.split / str.rsplit. sep == nullopt splits on runs of whitespace. maxsplit < 0 means no limit.
// Throws msa::Error for an empty separator.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace; count < 0 replaces all. An empty `old` inserts `repl` between code points, as Python does.
// Throws msa::Error when the result would exceed max_bytes.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count,
                    std::size_t max_bytes);
// str.find / str.rfind / str.count over the whole string; results are code-point indices (-1 when absent).
std::int64_t find(std::string_view s, std::string_view sub);
std::int64_t rfind(std::string_view s, std::string_view sub);
std::int64_t count(std::string_view s, std::string_view sub);
// str.center / ljust / rjust / zfill (width in code points; fill is one code point).
std::string pad(std::string_view s, std::int64_t width, char32_t fill, char align /* '<' '>' '^' */);
std::string zfill(std::string_view s, std::int64_t width);

// Python repr() of a str: quotes chosen like CPython, escapes for \\, the quote, \t \n \r and non-printables.
std::string repr(std::string_view s);
// Python repr()/str() of an int and a float ("1.0", "1e+16", "0.0001", "1e-05", "inf", "nan", "-0.0").
std::string int_repr(std::int64_t v);
std::string float_repr(double v);
// Python int(s, base) for a string (base 0 honours 0x/0o/0b prefixes); nullopt when Python raises ValueError.
// Values beyond 64 bits are reported as nullopt too.
std::optional<std::int64_t> parse_int(std::string_view s, int base);
// Python float(s) for a string; nullopt when Python raises ValueError.
std::optional<double> parse_float(std::string_view s);

}  // namespace msa::pytext
