#include "engine/fake_text.h"

#include "core/error.h"

#include <fmt/format.h>

namespace msa::testing {

FakeText::FakeText(std::int32_t vocab_size) {
    pieces_ = {"<eos>", "<pad>"};
    for (char c = 'a'; c <= 'z'; ++c) pieces_.emplace_back(1, c);
    for (const char* w : {" ",    "\n",   "the",  " the", "STOP", "ST",       "OP",       "!",  "END",   "\xE2", "\x82",
                          "\xAC", "\xF0", "\x9F", "\x98", "\x80", "\xC3\xA9", "\xE2\x82", "</", "think", ">"}) {
        pieces_.emplace_back(w);
    }
    MSA_CHECK(static_cast<std::int32_t>(pieces_.size()) <= vocab_size, "FakeText needs a vocabulary of at least {}.",
              pieces_.size());
    for (std::int32_t i = static_cast<std::int32_t>(pieces_.size()); i < vocab_size; ++i) {
        pieces_.push_back(fmt::format("w{} ", i));  // (std::string operator+ trips a GCC 12 -Wrestrict bug)
    }
}

std::string FakeText::bytes_of(const std::vector<std::int32_t>& ids) const {
    std::string out;
    for (std::int32_t id : ids) {
        if (!is_special(id)) out += pieces_.at(id);
    }
    return out;
}

std::int32_t FakeText::id_of(std::string_view piece) const {
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
        if (pieces_[i] == piece) return static_cast<std::int32_t>(i);
    }
    throw Error("FakeText: no such piece");
}

}  // namespace msa::testing
