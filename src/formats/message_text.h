// Text helpers for error messages about outside data (checkpoint headers, index and config files): names and
// parser messages taken from a corrupt file may hold control characters, newlines or megabytes of junk, and every
// msa::Error must stay one readable line.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace msa {

// `text` in double quotes, with quotes, control and non-ASCII bytes escaped (\", \n, \xNN), cut to about 200
// characters.
std::string quote_text(std::string_view text);
// `text` with control and non-ASCII bytes escaped, cut to about 300 characters (for parser messages; no quotes).
std::string printable(std::string_view text);
// How a JSON value is described in "must be X, found Y" messages: "an object", "a string", "a negative integer"...
std::string json_kind(const nlohmann::json& value);

}  // namespace msa
