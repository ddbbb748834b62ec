#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace msa::byte_level {
namespace {

bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
    std::array<char32_t, 256> char_of{};
    std::array<std::string, 256> utf8_of{};
    std::array<std::int16_t, 0x144> byte_of{};  // every alphabet character is below U+0144

    Tables() {
        byte_of.fill(-1);
        char32_t next = 0x100;
        for (unsigned b = 0; b < 256; ++b) {
            const char32_t c = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
            char_of[b] = c;
            utf8::append(utf8_of[b], c);
            byte_of[c] = static_cast<std::int16_t>(b);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

char32_t char_of_byte(std::uint8_t b) { return tables().char_of[b]; }

int byte_of_char(char32_t c) { return c < tables().byte_of.size() ? tables().byte_of[c] : -1; }

void append_mapped(std::string& out, std::string_view bytes) {
    const Tables& t = tables();
    for (const char c : bytes) out += t.utf8_of[static_cast<unsigned char>(c)];
}

bool append_unmapped(std::string& out, std::string_view token) {
    const std::size_t original = out.size();
    std::size_t pos = 0;
    while (pos < token.size()) {
        const int b = byte_of_char(utf8::decode(token, pos));
        if (b < 0) {
            out.resize(original);
            return false;
        }
        out.push_back(static_cast<char>(b));
    }
    return true;
}

}  // namespace msa::byte_level
