// Hand-written matchers for the most common pre-tokenizer patterns on ASCII text. Profiling showed PCRE2 spending
// about 40% of the encode time on English text in these patterns; the matchers below find a match from ASCII
// characters alone and otherwise answer "unknown", in which case Regex::find asks PCRE2. They are checked against
// PCRE2 by a property test (tests/tokenizer) and switched off with MSA_FORCE_SCALAR=1.
//
// Known patterns, recognised by their exact text in tokenizer.json (the constants below):
//   kQwen      Qwen2/Qwen3
//   kCl100k    Llama 3 (GPT-4's cl100k pattern)
//   kGpt2      GPT-2/RoBERTa (the ByteLevel pre-tokenizer's own pattern)
//   kDigits3   \p{N}{1,3} (DeepSeek-V3's first split)
//   kDeepSeek  DeepSeek-V3's word split
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

inline constexpr std::size_t kFastMatchUnknown = static_cast<std::size_t>(-1);

inline constexpr std::string_view kDigits3SplitPattern = R"(\p{N}{1,3})";
inline constexpr std::string_view kDeepSeekSplitPattern =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

enum class FastPattern { kNone, kQwen, kCl100k, kGpt2, kDigits3, kDeepSeek };

FastPattern detect_fast_pattern(std::string_view oniguruma_pattern);

enum class FastResult { kMatch, kNoMatch, kUnknown };

// The leftmost match at or after `start` (begin/end set), or the certainty that there is none, or kUnknown when a
// non-ASCII character could change the answer (the caller then runs the real regex from `start`).
FastResult fast_find(FastPattern pattern, std::string_view text, std::size_t start, std::size_t& begin,
                     std::size_t& end);

}  // namespace msa
