// Small helpers to read tokenizer.json values with error messages that name the exact JSON location.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"

namespace msa::json_fields {

// The member `key` of the object `object` at `where`; throws if `object` is not an object or lacks the member.
const nlohmann::json& require(const nlohmann::json& object, std::string_view key, const std::string& where);

// Optional members: the default when absent or null; throws when present with the wrong JSON type.
bool boolean(const nlohmann::json& object, std::string_view key, bool fallback, const std::string& where);
std::string string(const nlohmann::json& object, std::string_view key, const std::string& fallback,
                   const std::string& where);

// A required string member.
std::string required_string(const nlohmann::json& object, std::string_view key, const std::string& where);

// The "type" member of a component object (normalizer, pre_tokenizer, ...).
std::string type_of(const nlohmann::json& object, const std::string& where);

// A tokenizer.json pattern object: {"Regex": "<Oniguruma pattern>"} or {"String": "<literal text>"}.
Regex pattern(const nlohmann::json& object, const std::string& where);

// "where.key" for nested error locations.
inline std::string child(const std::string& where, std::string_view key) { return where + "." + std::string(key); }
inline std::string element(const std::string& where, std::size_t index) {
    return where + "[" + std::to_string(index) + "]";
}

}  // namespace msa::json_fields
