// Fuzz target for the tokenizer. The first input byte picks what the rest is fed to:
//   0: text to encode with the committed tiny tokenizer (tests/tokenizer/data/tiny_tokenizer.json). Valid UTF-8
//      must round-trip exactly (decode(encode(x)) == x, the tokenizer is lossless); invalid UTF-8 must be refused
//      with msa::Error. Its lossy repair must then encode and round-trip too.
//   1: token ids (16-bit little-endian values mapped onto [-4, id_limit + 4)) to decode: decode() and the streaming
//      decoder must agree, with and without skip_special_tokens, and produce valid UTF-8.
//   2: an Oniguruma regex pattern (as in a tokenizer.json Split): it compiles or fails with msa::Error, and its
//      matches over a fixed multilingual text lie inside the text, in order.
//   3: a whole tokenizer.json: it loads or fails with msa::Error; if it loads, encoding and decoding a fixed text
//      must not crash.
// Any other failure (a crash, a sanitizer report, or a broken invariant, which calls __builtin_trap) is a bug.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const msa::Tokenizer& tiny() {
    static const msa::Tokenizer tokenizer = msa::Tokenizer::from_file(MSA_FUZZ_TINY_TOKENIZER);
    return tokenizer;
}

void check(bool ok) {
    if (!ok) __builtin_trap();
}

constexpr const char* kSample =
    "Hello world! I've 12345 apples.\n\t<|im_start|>user \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 caf\xC3\xA9 "
    "e\xCC\x81 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82  \xC2\xA0\xE2\x80\xA8 end";

void encode_text(std::string_view bytes) {
    if (msa::utf8::is_valid(bytes)) {
        const auto ids = tiny().encode(bytes, false);
        check(tiny().decode(ids) == bytes);
        const auto with_special = tiny().encode(bytes, true);
        check(with_special == ids);  // the tiny tokenizer's post-processor adds nothing
    } else {
        bool refused = false;
        try {
            tiny().encode(bytes);
        } catch (const msa::Error&) {
            refused = true;
        }
        check(refused);
        const std::string repaired = msa::utf8::decode_lossy(bytes);
        check(msa::utf8::is_valid(repaired));
        check(tiny().decode(tiny().encode(repaired, false)) == repaired);
    }
}

void decode_ids(const std::uint8_t* data, std::size_t size) {
    const auto limit = static_cast<std::int64_t>(tiny().id_limit());
    std::vector<msa::TokenId> ids;
    for (std::size_t i = 0; i + 1 < size; i += 2) {
        const std::int64_t raw = data[i] | (data[i + 1] << 8);
        ids.push_back(static_cast<msa::TokenId>(raw % (limit + 8) - 4));
    }
    for (const bool skip : {false, true}) {
        const std::string text = tiny().decode(ids, skip);
        check(msa::utf8::is_valid(text));
        msa::StreamDecoder stream(tiny(), skip);
        std::string streamed;
        for (const msa::TokenId id : ids) {
            const std::string chunk = stream.push(id);
            check(msa::utf8::is_valid(chunk));
            streamed += chunk;
        }
        streamed += stream.flush();
        check(streamed == text);
    }
}

void match_pattern(std::string_view pattern) {
    if (!msa::utf8::is_valid(pattern)) return;  // tokenizer.json strings are UTF-8
    try {
        const msa::Regex regex(pattern);
        const std::string_view text(kSample);
        std::size_t previous_end = 0;
        std::size_t count = 0;
        regex.for_each_match(text, [&](std::size_t begin, std::size_t end) {
            check(begin <= end && end <= text.size() && begin >= previous_end);
            previous_end = end;
            ++count;
        });
        check(count <= text.size() + 1);
    } catch (const msa::Error&) {
        // A refused pattern (does not compile, unsupported construct, match limit) is a clean outcome.
    }
}

void load_tokenizer(std::string_view json) {
    try {
        const msa::Tokenizer tokenizer = msa::Tokenizer::from_string(json, "fuzz.json");
        const auto ids = tokenizer.encode(kSample);
        check(msa::utf8::is_valid(tokenizer.decode(ids)));
    } catch (const msa::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 4) {
        case 0: encode_text(rest); break;
        case 1: decode_ids(data + 1, size - 1); break;
        case 2: match_pattern(rest); break;
        case 3: load_tokenizer(rest); break;
    }
    return 0;
}
