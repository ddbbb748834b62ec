#include "formats/message_text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace msa {

namespace {

std::string escape(std::string_view text, std::size_t limit, bool quote) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (out.size() >= limit) {
            out += fmt::format("... ({} bytes)", text.size());
            break;
        }
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '"' && quote) {
            out += "\\\"";
        } else if (c < 0x20 || c >= 0x7F) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace

std::string quote_text(std::string_view text) {
    return fmt::format("\"{}\"", escape(text, 200, true));
}

std::string printable(std::string_view text) {
    return escape(text, 300, false);
}

std::string json_kind(const nlohmann::json& value) {
    switch (value.type()) {
        case nlohmann::json::value_t::null:
            return "null";
        case nlohmann::json::value_t::object:
            return "an object";
        case nlohmann::json::value_t::array:
            return "an array";
        case nlohmann::json::value_t::string:
            return "a string";
        case nlohmann::json::value_t::boolean:
            return "a boolean";
        case nlohmann::json::value_t::number_integer:
            return value.get<std::int64_t>() < 0 ? "a negative integer" : "an integer";
        case nlohmann::json::value_t::number_unsigned:
            return "an integer";
        case nlohmann::json::value_t::number_float:
            return "a fractional number";
        default:
            return "a binary value";
    }
}

}  // namespace msa
