// Pre-tokenizers of tokenizer.json ("pre_tokenizer" field): they cut every non-token piece into smaller pieces that
// the model then encodes independently, with the exact split rules of Hugging Face tokenizers.
//
// Supported: Split (regex or literal pattern; behaviours Isolated, Removed, MergedWithPrevious, MergedWithNext,
// Contiguous; invert), ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), Digits (individual_digits),
// Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence. Others (Metaspace, CharDelimiterSplit,
// UnicodeScripts, FixedLength) are rejected at load time with an error naming the type.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/piece_list.h"

namespace msa {

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    // Splits (and for ByteLevel, transforms) every piece whose token is unset.
    virtual void pre_tokenize(PieceList& list) const = 0;
};

// Builds the pre-tokenizer described by a tokenizer.json "pre_tokenizer" value; nullptr for JSON null.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config, const std::string& where);

}  // namespace msa
