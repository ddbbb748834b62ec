// What the engine needs from a tokenizer to turn generated tokens into text (for stop strings and streamed text
// pieces). The tokenizer module implements this; the engine never includes the tokenizer.
#pragma once

#include <cstdint>
#include <string_view>

namespace msa {

class TokenTextSource {
public:
    virtual ~TokenTextSource() = default;
    // The bytes token `id` stands for in output text (byte-level BPE: the token's bytes after ByteLevel decoding).
    // May be part of a UTF-8 character; the engine assembles characters across tokens. The view must stay valid
    // for the lifetime of the source.
    virtual std::string_view token_bytes(std::int32_t id) const = 0;
    // True for special (control) tokens, which contribute no text when a request has skip_special_tokens.
    virtual bool is_special(std::int32_t id) const = 0;
};

}  // namespace msa
