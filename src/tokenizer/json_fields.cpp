#include "tokenizer/json_fields.h"

#include "core/error.h"

namespace msa::json_fields {

const nlohmann::json& require(const nlohmann::json& object, std::string_view key, const std::string& where) {
    MSA_CHECK(object.is_object(), "{} must be a JSON object, not {}", where, object.type_name());
    const auto it = object.find(key);
    MSA_CHECK(it != object.end(), "{} has no \"{}\" field", where, key);
    return *it;
}

bool boolean(const nlohmann::json& object, std::string_view key, bool fallback, const std::string& where) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    MSA_CHECK(it->is_boolean(), "{} must be true or false, not {}", child(where, key), it->dump());
    return it->get<bool>();
}

std::string string(const nlohmann::json& object, std::string_view key, const std::string& fallback,
                   const std::string& where) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    MSA_CHECK(it->is_string(), "{} must be a string, not {}", child(where, key), it->type_name());
    return it->get<std::string>();
}

std::string required_string(const nlohmann::json& object, std::string_view key, const std::string& where) {
    const nlohmann::json& value = require(object, key, where);
    MSA_CHECK(value.is_string(), "{} must be a string, not {}", child(where, key), value.type_name());
    return value.get<std::string>();
}

std::string type_of(const nlohmann::json& object, const std::string& where) {
    return required_string(object, "type", where);
}

Regex pattern(const nlohmann::json& object, const std::string& where) {
    MSA_CHECK(object.is_object() && object.size() == 1,
              "{} must be an object with one field, \"Regex\" or \"String\", not {}", where, object.dump());
    if (object.contains("Regex")) return Regex(required_string(object, "Regex", where));
    if (object.contains("String")) return Regex::literal(required_string(object, "String", where));
    fail("{} must be {{\"Regex\": ...}} or {{\"String\": ...}}, not {}", where, object.dump());
}

}  // namespace msa::json_fields
