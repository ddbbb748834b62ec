// Typed, validated access to the fields of one JSON object of a request. Every failure is a 400 ApiError whose
// `param` is the full path of the field ("temperature", "stream_options.include_usage", "messages[2].content"),
// so a client always learns which field was wrong and why. A field that is absent or null counts as not given
// (OpenAI clients send explicit nulls for unset options).
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace msa::server {

// "integer", "string", "array", ... as an error message would name the type of a JSON value.
std::string json_type_name(const nlohmann::json& value);

class JsonFields {
public:
    // `object` must outlive this view. Throws invalid_request(path) when it is not a JSON object.
    JsonFields(const nlohmann::json& object, std::string path);

    // The path of a member: "key" at the top level, "parent.key" below it.
    std::string path(std::string_view key) const;
    const std::string& path() const { return path_; }
    const nlohmann::json& json() const { return *object_; }

    // The member, or nullptr when absent or null.
    const nlohmann::json* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    std::optional<std::string> string(std::string_view key) const;
    std::string required_string(std::string_view key) const;
    std::optional<bool> boolean(std::string_view key) const;
    // An integral JSON number within [min, max] (3.0 is accepted as 3; 3.5, "3" and true are not).
    std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max) const;
    // A finite JSON number within [min, max].
    std::optional<double> number(std::string_view key, double min, double max) const;
    // The member when it is an object / array (as a view / reference), after checking its type.
    std::optional<JsonFields> object(std::string_view key) const;
    const nlohmann::json* array(std::string_view key) const;

    // Throws the "expected <type>" error for the member `key` holding `value`.
    [[noreturn]] void wrong_type(std::string_view key, std::string_view expected, const nlohmann::json& value) const;

private:
    const nlohmann::json* object_;
    std::string path_;
};

// Checks that a JSON number is an integer in [min, max]; `path` names it in the error.
std::int64_t json_to_integer(const nlohmann::json& value, const std::string& path, std::int64_t min,
                             std::int64_t max);

}  // namespace msa::server
