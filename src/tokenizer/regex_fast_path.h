// Hand-written matchers for the most common pre-tokenizer patterns on ASCII text. Profiling showed PCRE2 spending
// about 40% of the encode time on English text in these patterns; the matchers below decide a match from ASCII
// characters alone and otherwise answer "unknown", in which case Regex::find asks PCRE2. They are checked against
// PCRE2 by a property test (tests/tokenizer) and switched off with MSA_FORCE_SCALAR=1.
//
// Known patterns, recognised by their exact text in tokenizer.json:
//   kQwen    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kCl100k  the same with \p{N}{1,3} (Llama 3, GPT-4)
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ (ByteLevel use_regex)
#pragma once

#include <cstddef>
#include <string_view>

namespace msa {

inline constexpr std::string_view kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kCl100kSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// The pattern GPT-2 style ByteLevel pre-tokenizers split with when use_regex is true.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class FastPattern { kNone, kQwen, kCl100k, kGpt2 };

FastPattern detect_fast_pattern(std::string_view oniguruma_pattern);

inline constexpr std::size_t kFastMatchUnknown = static_cast<std::size_t>(-1);

// The end of the pattern's match that starts at `start` (these patterns match at every position), or
// kFastMatchUnknown when a non-ASCII character could change the answer. Requires start < text.size().
std::size_t fast_match_at(FastPattern pattern, std::string_view text, std::size_t start);

}  // namespace msa
