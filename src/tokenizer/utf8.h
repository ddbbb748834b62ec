// UTF-8 helpers for the tokenizer: validation, code point decoding/encoding, and lossy decoding of byte streams that
// replaces each ill-formed subsequence with U+FFFD exactly like Rust's String::from_utf8_lossy (one U+FFFD per
// "maximal subpart", the Unicode/WHATWG practice), so decoded text matches Hugging Face tokenizers byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace msa::utf8 {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length of the longest prefix of `bytes` that is well-formed UTF-8.
std::size_t valid_prefix_length(std::string_view bytes);
inline bool is_valid(std::string_view bytes) { return valid_prefix_length(bytes) == bytes.size(); }

// Decodes the code point starting at text[pos] of a string known to be valid UTF-8 and advances pos past it.
inline char32_t decode(std::string_view text, std::size_t& pos) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
    const unsigned char b0 = p[0];
    if (b0 < 0x80) {
        pos += 1;
        return b0;
    }
    if (b0 < 0xE0) {
        pos += 2;
        return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (b0 < 0xF0) {
        pos += 3;
        return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    pos += 4;
    return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Number of bytes of the UTF-8 sequence that starts with lead byte b (1 for ASCII and for stray bytes).
inline std::size_t sequence_length(unsigned char b) {
    if (b < 0xC0) return 1;
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    return 4;
}

// Appends the UTF-8 encoding of a valid code point.
void append(std::string& out, char32_t cp);

// Decodes a complete byte string, replacing ill-formed subsequences with U+FFFD (Rust from_utf8_lossy).
std::string decode_lossy(std::string_view bytes);

// Incremental form of decode_lossy: feed bytes in any chunks; the concatenated output equals decode_lossy of the
// concatenated input. Bytes that may still become a valid character are held back until the next push or finish().
class LossyDecoder {
public:
    // Appends to `out` every character that is complete (or known to be ill-formed) after adding `bytes`.
    void push(std::string_view bytes, std::string& out);
    // Ends the stream: a held-back incomplete sequence becomes one U+FFFD.
    void finish(std::string& out);
    // Bytes currently held back (0 to 3).
    std::size_t pending() const { return pending_size_; }
    void reset() { pending_size_ = 0; }

private:
    unsigned char pending_[4] = {};
    std::size_t pending_size_ = 0;
};

}  // namespace msa::utf8
