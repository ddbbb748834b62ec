// Post-processors of tokenizer.json ("post_processor" field): they add the template's special tokens (e.g. Llama 3's
// <|begin_of_text|>) around an encoded sequence when encode() is called with add_special_tokens.
//
// Supported: TemplateProcessing (single-sequence template), BertProcessing and RobertaProcessing ([cls] A [sep]),
// ByteLevel (only adjusts offsets, so nothing to do for ids), Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/bpe_model.h"

namespace msa {

class PostProcessor {
public:
    PostProcessor() = default;
    // Adds the special tokens of the single-sequence template around `ids` (only when add_special_tokens is true).
    void process(std::vector<TokenId>& ids, bool add_special_tokens) const;
    bool adds_tokens() const { return !prefix_.empty() || !suffix_.empty(); }
    const std::vector<TokenId>& prefix() const { return prefix_; }
    const std::vector<TokenId>& suffix() const { return suffix_; }

    // Builds from a tokenizer.json "post_processor" value (null: adds nothing).
    static PostProcessor from_json(const nlohmann::json& config, const std::string& where);

private:
    void append(const nlohmann::json& config, const std::string& where);

    std::vector<TokenId> prefix_;  // ids before the sequence
    std::vector<TokenId> suffix_;  // ids after it
};

}  // namespace msa
