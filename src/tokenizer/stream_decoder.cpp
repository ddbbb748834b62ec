#include "tokenizer/stream_decoder.h"

namespace msa {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

void StreamDecoder::push(TokenId id, std::string& out) {
    if (!tokenizer_->contains_id(id)) return;  // unknown ids decode to nothing, as in decode()
    if (skip_special_tokens_ && tokenizer_->is_special(id)) return;
    const std::string_view bytes = tokenizer_->token_bytes(id);
    if (tokenizer_->joins_with_spaces()) {
        // Token strings are whole UTF-8 strings: nothing to hold back.
        if (emitted_token_) out += ' ';
        out.append(bytes);
        emitted_token_ = true;
        return;
    }
    lossy_.push(bytes, out);
}

std::string StreamDecoder::push(TokenId id) {
    std::string out;
    push(id, out);
    return out;
}

void StreamDecoder::flush(std::string& out) {
    lossy_.finish(out);
    emitted_token_ = false;
}

std::string StreamDecoder::flush() {
    std::string out;
    flush(out);
    return out;
}

void StreamDecoder::reset() {
    lossy_.reset();
    emitted_token_ = false;
}

}  // namespace msa
