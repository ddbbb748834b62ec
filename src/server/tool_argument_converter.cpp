#include "server/tool_argument_converter.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace msa::server {

using nlohmann::json;

namespace {

unsigned type_bit(std::string_view name) {
    if (name == "string") return SchemaTypes::string;
    if (name == "integer") return SchemaTypes::integer;
    if (name == "number") return SchemaTypes::number;
    if (name == "boolean") return SchemaTypes::boolean;
    if (name == "object") return SchemaTypes::object;
    if (name == "array") return SchemaTypes::array;
    if (name == "null") return SchemaTypes::null;
    return 0;
}

unsigned value_bit(const json& v) {
    if (v.is_string()) return SchemaTypes::string;
    if (v.is_number_integer() || v.is_number_unsigned()) return SchemaTypes::integer;
    if (v.is_number()) return SchemaTypes::number;
    if (v.is_boolean()) return SchemaTypes::boolean;
    if (v.is_object()) return SchemaTypes::object;
    if (v.is_array()) return SchemaTypes::array;
    return SchemaTypes::null;
}

unsigned collect_types(const json& schema, int depth) {
    if (!schema.is_object() || depth > 16) return 0;
    unsigned bits = 0;
    if (const auto it = schema.find("type"); it != schema.end()) {
        if (it->is_string()) bits |= type_bit(it->get<std::string>());
        if (it->is_array()) {
            for (const auto& t : *it) {
                if (t.is_string()) bits |= type_bit(t.get<std::string>());
            }
        }
    }
    if (const auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
        for (const auto& v : *it) bits |= value_bit(v);
    }
    if (const auto it = schema.find("const"); it != schema.end()) bits |= value_bit(*it);
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
        if (const auto it = schema.find(key); it != schema.end() && it->is_array()) {
            for (const auto& sub : *it) bits |= collect_types(sub, depth + 1);
        }
    }
    if (bits == 0 && schema.contains("properties")) bits = SchemaTypes::object;
    if (bits == 0 && schema.contains("items")) bits = SchemaTypes::array;
    return bits;
}

std::string_view trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

std::optional<json> parse_integer(std::string_view s) {
    if (s.empty()) return std::nullopt;
    std::int64_t value = 0;
    const char* begin = s.data() + (s.front() == '+' ? 1 : 0);
    const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return json(value);
}

std::optional<json> parse_number(std::string_view s) {
    if (auto i = parse_integer(s)) return i;
    if (s.empty()) return std::nullopt;
    double value = 0;
    const char* begin = s.data() + (s.front() == '+' ? 1 : 0);
    const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
    return json(value);
}

std::optional<json> parse_boolean(std::string_view s) {
    std::string lower(s);
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "true" || lower == "yes" || lower == "1") return json(true);
    if (lower == "false" || lower == "no" || lower == "0") return json(false);
    return std::nullopt;
}

std::optional<json> parse_json_value(std::string_view s) {
    json value = json::parse(s.begin(), s.end(), nullptr, false);
    if (value.is_discarded()) return std::nullopt;
    return value;
}

const json* sub_schema_find(const json& schema, std::string_view key, std::string_view name, int depth) {
    if (!schema.is_object() || depth > 16) return nullptr;
    if (const auto props = schema.find(key); props != schema.end() && props->is_object()) {
        if (name.empty()) return &*props;
        if (const auto p = props->find(name); p != props->end()) return &*p;
    }
    for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
        if (const auto it = schema.find(combinator); it != schema.end() && it->is_array()) {
            for (const auto& sub : *it) {
                if (const auto* found = sub_schema_find(sub, key, name, depth + 1)) return found;
            }
        }
    }
    return nullptr;
}

}  // namespace

SchemaTypes schema_types(const json& schema) { return SchemaTypes{collect_types(schema, 0)}; }

const json* property_schema(const json& object_schema, std::string_view name) {
    if (const auto* found = sub_schema_find(object_schema, "properties", name, 0)) return found;
    if (object_schema.is_object()) {
        if (const auto it = object_schema.find("additionalProperties"); it != object_schema.end() && it->is_object()) {
            return &*it;
        }
    }
    return nullptr;
}

const json* items_schema(const json& array_schema) {
    if (!array_schema.is_object()) return nullptr;
    if (const auto it = array_schema.find("items"); it != array_schema.end() && it->is_object()) return &*it;
    for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
        if (const auto it = array_schema.find(combinator); it != array_schema.end() && it->is_array()) {
            for (const auto& sub : *it) {
                if (const auto* found = items_schema(sub)) return found;
            }
        }
    }
    return nullptr;
}

json convert_argument(std::string_view raw, const json* schema) {
    if (schema == nullptr) return json(std::string(raw));
    const std::string_view text = trim(raw);
    if (text == "null") return nullptr;
    const SchemaTypes types = schema_types(*schema);
    if (types.any()) {
        if (auto v = parse_json_value(text)) return *v;
        return json(std::string(raw));
    }
    if (types.has(SchemaTypes::integer)) {
        if (auto v = parse_integer(text)) return *v;
    }
    if (types.has(SchemaTypes::number)) {
        if (auto v = parse_number(text)) return *v;
    }
    if (types.has(SchemaTypes::boolean)) {
        if (auto v = parse_boolean(text)) return *v;
    }
    if (types.has(SchemaTypes::object) || types.has(SchemaTypes::array)) {
        if (auto v = parse_json_value(text);
            v && ((v->is_object() && types.has(SchemaTypes::object)) || (v->is_array() && types.has(SchemaTypes::array)))) {
            return *v;
        }
    }
    if (types.has(SchemaTypes::string)) return json(std::string(raw));
    // Nothing the schema allows matched: keep what the model wrote, as JSON when it is JSON.
    if (auto v = parse_json_value(text)) return *v;
    return json(std::string(raw));
}

}  // namespace msa::server
