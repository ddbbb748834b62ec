// A small fake tokenizer vocabulary for engine tests: token id -> bytes, with multi-byte UTF-8 characters split
// across tokens and a few special tokens.
#pragma once

#include "engine/token_text.h"

#include <string>
#include <vector>

namespace msa::testing {

class FakeText : public TokenTextSource {
public:
    // Ids: 0 = "<eos>" (special), 1 = "<pad>" (special), then single letters, words, pieces of "€" (E2 82 AC) and
    // of "😀" (F0 9F 98 80), whole "é", a lone continuation byte, and filler up to vocab_size.
    explicit FakeText(std::int32_t vocab_size);
    std::string_view token_bytes(std::int32_t id) const override { return pieces_.at(id); }
    bool is_special(std::int32_t id) const override { return id <= 1; }

    // Concatenated bytes of `ids` (special tokens skipped), for building expectations.
    std::string bytes_of(const std::vector<std::int32_t>& ids) const;
    // The id of a piece (first match); throws when absent.
    std::int32_t id_of(std::string_view piece) const;

private:
    std::vector<std::string> pieces_;
};

}  // namespace msa::testing
