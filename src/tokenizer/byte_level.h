// The GPT-2 ByteLevel alphabet: every byte value is shown as one printable Unicode character, so that a byte-level
// BPE vocabulary is a set of ordinary strings. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves; the
// other 68 bytes map, in order, to U+0100..U+0143 (a space becomes "Ġ" U+0120, a newline "Ċ" U+010A).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace msa::byte_level {

// The character that stands for byte b.
char32_t char_of_byte(std::uint8_t b);
// The byte a character stands for, or -1 if the character is not in the alphabet.
int byte_of_char(char32_t c);

// Appends the ByteLevel characters (UTF-8) of every byte of `bytes`.
void append_mapped(std::string& out, std::string_view bytes);

// Decodes a token string: if every character is in the alphabet, appends the bytes they stand for and returns true;
// otherwise appends nothing and returns false (the caller then uses the token's own UTF-8 bytes).
bool append_unmapped(std::string& out, std::string_view token);

}  // namespace msa::byte_level
