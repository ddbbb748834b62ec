// The engine's view of a tokenizer (token_text.h) over msa::Tokenizer: the bytes each token adds to the output
// (ByteLevel-decoded) and whether it is special. The engine assembles UTF-8 across tokens the way StreamDecoder
// does (lossy, maximal subparts), so a request's streamed text equals Tokenizer::decode of its tokens for
// byte-level tokenizers.
#pragma once

#include "engine/token_text.h"
#include "tokenizer/tokenizer.h"

namespace msa {

class TokenizerTextSource final : public TokenTextSource {
public:
    explicit TokenizerTextSource(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
    std::string_view token_bytes(std::int32_t id) const override { return tokenizer_.token_bytes(id); }
    bool is_special(std::int32_t id) const override { return tokenizer_.is_special(id); }

private:
    const Tokenizer& tokenizer_;
};

}  // namespace msa
