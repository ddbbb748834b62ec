// Decoders of tokenizer.json ("decoder" field): how token strings become text again.
//
// Supported: ByteLevel (each token's characters stand for bytes; the bytes of all tokens are decoded as UTF-8, with
// U+FFFD for ill-formed sequences, as Hugging Face does), a Sequence holding only ByteLevel, and no decoder (null:
// token strings joined with single spaces, Hugging Face's fallback). Other decoder types are rejected at load time
// with an error naming the type.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace msa {

enum class DecoderKind {
    kJoinWithSpaces,  // "decoder": null
    kByteLevel,
};

DecoderKind decoder_kind_from_json(const nlohmann::json& config, const std::string& where);

}  // namespace msa
