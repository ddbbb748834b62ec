// A Hugging Face tokenizer.json tokenizer (the byte-level BPE family used by Qwen, Llama 3, DeepSeek, gpt-oss and
// MiniMax) with ids identical to Hugging Face's own Rust `tokenizers` library.
//
//   msa::Tokenizer tok = msa::Tokenizer::from_file("model/tokenizer.json");
//   std::vector<msa::TokenId> ids = tok.encode("Hello world", /*add_special_tokens=*/true);
//   std::string text = tok.decode(ids, /*skip_special_tokens=*/false);
//
// Encoding runs the pipeline of the file: added/special tokens are cut out first, then normalizer, pre-tokenizer,
// BPE model and post-processor (see docs/architecture.md, "Tokenizer"). A Tokenizer is immutable after loading and
// all its methods may be called from many threads at once. For streaming output use StreamDecoder
// (stream_decoder.h).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/bpe_model.h"

namespace msa {

class Tokenizer {
public:
    // Loads a tokenizer.json file. Throws msa::Error naming the file and the JSON location of any problem.
    static Tokenizer from_file(const std::string& path);
    // Loads from JSON text or a parsed document; `source` names it in error messages.
    static Tokenizer from_string(std::string_view json_text, const std::string& source = "tokenizer.json");
    static Tokenizer from_json(const nlohmann::json& config, const std::string& source = "tokenizer.json");

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Token ids of `text`, which must be valid UTF-8 (msa::Error otherwise). add_special_tokens applies the
    // post-processor's template (e.g. a leading BOS); special tokens written in the text are always recognised.
    std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;
    // Appends the ids to `out` (lets callers reuse a buffer).
    void encode(std::string_view text, bool add_special_tokens, std::vector<TokenId>& out) const;

    // Text of `ids`. Unknown ids are skipped; with skip_special_tokens, special added tokens are skipped too.
    // Byte sequences that are not valid UTF-8 become U+FFFD, as in Hugging Face.
    std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

    std::optional<TokenId> token_to_id(std::string_view token) const;  // added tokens first, then the vocabulary
    std::optional<std::string> id_to_token(TokenId id) const;
    bool is_special(TokenId id) const;
    bool contains_id(TokenId id) const;  // the vocabulary or an added token has this id  // an added token marked "special" (skipped by skip_special_tokens)
    // One more than the largest id the tokenizer can produce or decode (model vocabulary and added tokens).
    std::size_t id_limit() const;
    // The template tokens encode() adds with add_special_tokens (e.g. {BOS} and {}).
    const std::vector<TokenId>& template_prefix() const;
    const std::vector<TokenId>& template_suffix() const;

    // What one token contributes to the decoded output before UTF-8 decoding: its bytes for ByteLevel decoders,
    // its string otherwise. Empty for unknown ids. Used by StreamDecoder.
    std::string_view token_bytes(TokenId id) const;
    bool joins_with_spaces() const;  // decoder null: tokens are joined with " "

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace msa
