// UTF-8 streaming: characters split across tokens come out whole, ill-formed bytes become U+FFFD by the
// "maximal subpart" rule (expected strings below are what Python's bytes.decode("utf-8", "replace") gives), and
// streaming in any split equals decoding all at once.
#include "engine/utf8_assembler.h"
#include "engine/request_rng.h"

#include <gtest/gtest.h>

namespace msa {
namespace {

std::string decode_all(std::string_view bytes) {
    Utf8Assembler a;
    std::string out;
    a.push(bytes, out);
    a.flush(out);
    return out;
}

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8Assembler, ValidTextPassesThrough) {
    const std::string text = "plain, \xC3\xA9t\xC3\xA9, \xE2\x82\xAC 5, \xF0\x9F\x98\x80, \xE4\xB8\xAD\xE6\x96\x87";
    EXPECT_EQ(decode_all(text), text);
}

TEST(Utf8Assembler, SplitCharactersWaitForTheirLastByte) {
    Utf8Assembler a;
    std::string out;
    a.push("a\xE2", out);
    EXPECT_EQ(out, "a");
    EXPECT_TRUE(a.has_pending());
    a.push("\x82", out);
    EXPECT_EQ(out, "a");
    a.push("\xAC", out);
    EXPECT_EQ(out, "a\xE2\x82\xAC");
    EXPECT_FALSE(a.has_pending());
}

TEST(Utf8Assembler, IllFormedBytesUseMaximalSubparts) {
    EXPECT_EQ(decode_all("\x80"), R);                          // lone continuation byte
    EXPECT_EQ(decode_all("\xC0\xAF"), R + R);                  // overlong lead byte, then continuation
    EXPECT_EQ(decode_all("\xE0\x80\x80"), R + R + R);          // E0 needs A0..BF next
    EXPECT_EQ(decode_all("\xED\xA0\x80"), R + R + R);          // surrogate
    EXPECT_EQ(decode_all("\xF0\x80\x80\x80"), R + R + R + R);  // F0 needs 90..BF next
    EXPECT_EQ(decode_all("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
    EXPECT_EQ(decode_all("\xE2\x82"
                         "a"),
              R + "a");                        // truncated sequence: one U+FFFD
    EXPECT_EQ(decode_all("\xF0\x9F\x98"), R);  // truncated at the end of the stream
    EXPECT_EQ(decode_all("\xF5\xFF"), R + R);  // never-valid bytes
    EXPECT_EQ(decode_all("a\xE2\x82\xE2\x82\xAC"), "a" + R + "\xE2\x82\xAC");
}

TEST(Utf8Assembler, StreamingEqualsDecodingAtOnce) {
    // Random byte strings biased towards UTF-8 structure, split at random points.
    const unsigned char alphabet[] = {'a',  ' ',  0x80, 0x9F, 0xA0, 0xBF, 0xC2, 0xC3, 0xDF,
                                      0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0x82, 0xAC};
    for (int trial = 0; trial < 3000; ++trial) {
        RequestRng rng(trial, 1);
        std::string bytes;
        const int len = 1 + static_cast<int>(rng.uniform(0) * 24);
        for (int i = 0; i < len; ++i)
            bytes.push_back(static_cast<char>(alphabet[static_cast<int>(rng.uniform(i + 1) * sizeof alphabet)]));
        Utf8Assembler a;
        std::string streamed;
        std::size_t pos = 0;
        int draw = 100;
        while (pos < bytes.size()) {
            const std::size_t n = 1 + static_cast<std::size_t>(rng.uniform(draw++) * 4);
            a.push(std::string_view(bytes).substr(pos, n), streamed);
            pos += n;
        }
        a.flush(streamed);
        ASSERT_EQ(streamed, decode_all(bytes)) << "trial " << trial;
    }
}

}  // namespace
}  // namespace msa
