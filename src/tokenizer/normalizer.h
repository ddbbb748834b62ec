// Normalizers of tokenizer.json ("normalizer" field): they rewrite the text of every piece that is not an added
// token before pre-tokenization.
//
// Supported: NFC, NFD, NFKC, NFKD (through utf8proc, restricted to the Unicode 9.0 repertoire the oracle's
// normalizer knows), Sequence, Prepend, Replace (literal or regex pattern), Strip, Lowercase. Others (BertNormalizer,
// Precompiled, Nmt, StripAccents, ByteLevel) are rejected at load time with an error naming the type.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace msa {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    // Rewrites `text` (valid UTF-8) in place.
    virtual void normalize(std::string& text) const = 0;
};

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

// Unicode normalization of valid UTF-8 as the oracle does it: code points assigned after Unicode 9.0 are left as
// they are and separate the text into independently normalized segments.
std::string normalize_unicode(std::string_view text, UnicodeForm form);

// Builds the normalizer described by a tokenizer.json "normalizer" value; returns nullptr for JSON null. `where`
// names the JSON location for error messages (e.g. "tokenizer.json: normalizer").
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config, const std::string& where);

}  // namespace msa
