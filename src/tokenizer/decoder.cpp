#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace msa {

DecoderKind decoder_kind_from_json(const nlohmann::json& config, const std::string& where) {
    namespace jf = json_fields;
    if (config.is_null()) return DecoderKind::kJoinWithSpaces;
    const std::string type = jf::type_of(config, where);
    if (type == "ByteLevel") return DecoderKind::kByteLevel;
    if (type == "Sequence") {
        const nlohmann::json& list = jf::require(config, "decoders", where);
        MSA_CHECK(list.is_array() && list.size() == 1,
                  "{}: only a Sequence holding a single ByteLevel decoder is supported, not {}", where, list.dump());
        const std::string inner = jf::element(jf::child(where, "decoders"), 0);
        MSA_CHECK(jf::type_of(list[0], inner) == "ByteLevel",
                  "{}: only a Sequence holding a single ByteLevel decoder is supported", where);
        return DecoderKind::kByteLevel;
    }
    fail("{}: decoder type \"{}\" is not supported (supported: ByteLevel, or null)", where, type);
}

}  // namespace msa
