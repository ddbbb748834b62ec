// Streaming detokenization: turns generated token ids into text one token at a time, emitting only complete UTF-8
// characters. A token that ends in the middle of a character (byte-level BPE splits emoji and CJK characters
// across tokens) contributes nothing until the character is complete; bytes that can never become a valid
// character are emitted as U+FFFD. The engine's stop-string matching and the server's SSE output use it.
//
//   msa::StreamDecoder stream(tokenizer, /*skip_special_tokens=*/true);
//   for (msa::TokenId id : generated) send(stream.push(id));   // "" while a character is incomplete
//   send(stream.flush());                                      // at the end of the stream
//
// Guarantee: the concatenation of every push() and the final flush() equals tokenizer.decode(all ids,
// skip_special_tokens), and every returned string is valid UTF-8. A StreamDecoder is one stream's state: use one
// per sequence (the Tokenizer it refers to must outlive it). It is cheap to create and to copy.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace msa {

class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

    // Adds one token; returns the text that became complete (often empty for a partial character).
    std::string push(TokenId id);
    // Same, appending to `out` instead of allocating.
    void push(TokenId id, std::string& out);
    // Ends the stream: returns what is still held back (an incomplete character becomes U+FFFD), and resets.
    std::string flush();
    void flush(std::string& out);

    // Bytes currently held back because they may still become a character (0 to 3).
    std::size_t pending_bytes() const { return lossy_.pending(); }
    // Starts a new stream (drops held-back bytes).
    void reset();

private:
    const Tokenizer* tokenizer_;
    bool skip_special_tokens_;
    bool emitted_token_ = false;  // for decoders that join tokens with spaces
    utf8::LossyDecoder lossy_;
};

}  // namespace msa
