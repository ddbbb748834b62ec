// Streams bytes into valid UTF-8 text: complete characters go out as soon as they are complete, an incomplete
// character is held until its next bytes arrive, and ill-formed bytes become U+FFFD using the Unicode "maximal
// subpart" rule (the same result as Rust's String::from_utf8_lossy, which Hugging Face tokenizers use).
#pragma once

#include <string>
#include <string_view>

namespace msa {

class Utf8Assembler {
public:
    // Appends the text that `bytes` completes to `out`.
    void push(std::string_view bytes, std::string& out);
    // End of stream: a held incomplete character becomes U+FFFD.
    void flush(std::string& out);
    bool has_pending() const { return !pending_.empty(); }

private:
    std::string pending_;  // at most 3 bytes: the start of a character not yet complete
};

}  // namespace msa
