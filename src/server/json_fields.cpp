#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace msa::server {

std::string json_type_name(const nlohmann::json& value) {
    switch (value.type()) {
        case nlohmann::json::value_t::null: return "null";
        case nlohmann::json::value_t::boolean: return "boolean";
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned: return "integer";
        case nlohmann::json::value_t::number_float: return "number";
        case nlohmann::json::value_t::string: return "string";
        case nlohmann::json::value_t::array: return "array";
        case nlohmann::json::value_t::object: return "object";
        default: return "value";
    }
}

namespace {

std::string format_number(double value) {
    if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
        return fmt::format("{}", static_cast<long long>(value));
    }
    return fmt::format("{}", value);
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string path) : object_(&object), path_(std::move(path)) {
    if (!object.is_object()) {
        throw invalid_request(path_.empty() ? std::string() : path_,
                              path_.empty() ? fmt::format("The request body must be a JSON object, not {}.",
                                                          json_type_name(object))
                                            : fmt::format("'{}' must be an object, not {}.", path_,
                                                          json_type_name(object)));
    }
}

std::string JsonFields::path(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

const nlohmann::json* JsonFields::find(std::string_view key) const {
    const auto it = object_->find(key);
    if (it == object_->end() || it->is_null()) return nullptr;
    return &*it;
}

void JsonFields::wrong_type(std::string_view key, std::string_view expected, const nlohmann::json& value) const {
    const std::string name = path(key);
    throw invalid_request(name, fmt::format("Invalid type for '{}': expected {}, but got {}.", name, expected,
                                            json_type_name(value)));
}

std::optional<std::string> JsonFields::string(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) wrong_type(key, "a string", *value);
    return value->get<std::string>();
}

std::string JsonFields::required_string(std::string_view key) const {
    auto value = string(key);
    if (!value) {
        const std::string name = path(key);
        throw invalid_request(name, fmt::format("Missing required parameter: '{}'.", name));
    }
    return std::move(*value);
}

std::optional<bool> JsonFields::boolean(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) wrong_type(key, "a boolean", *value);
    return value->get<bool>();
}

std::int64_t json_to_integer(const nlohmann::json& value, const std::string& path, std::int64_t min,
                             std::int64_t max) {
    std::int64_t result = 0;
    if (value.is_number_integer()) {
        result = value.get<std::int64_t>();
    } else if (value.is_number_unsigned()) {
        const auto u = value.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            throw invalid_request(path, fmt::format("'{}' is too large: {}.", path, u));
        }
        result = static_cast<std::int64_t>(u);
    } else if (value.is_number_float()) {
        const double d = value.get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || d < -9.2e18 || d > 9.2e18) {
            throw invalid_request(path, fmt::format("Invalid type for '{}': expected an integer, but got {}.", path,
                                                    format_number(d)));
        }
        result = static_cast<std::int64_t>(d);
    } else {
        throw invalid_request(path, fmt::format("Invalid type for '{}': expected an integer, but got {}.", path,
                                                json_type_name(value)));
    }
    if (result < min || result > max) {
        if (max == std::numeric_limits<std::int64_t>::max()) {
            throw invalid_request(path, fmt::format("'{}' must be at least {}; got {}.", path, min, result));
        }
        throw invalid_request(path, fmt::format("'{}' must be between {} and {}; got {}.", path, min, max, result));
    }
    return result;
}

std::optional<std::int64_t> JsonFields::integer(std::string_view key, std::int64_t min, std::int64_t max) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    return json_to_integer(*value, path(key), min, max);
}

std::optional<double> JsonFields::number(std::string_view key, double min, double max) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) wrong_type(key, "a number", *value);
    const double d = value->get<double>();
    const std::string name = path(key);
    if (!std::isfinite(d) || d < min || d > max) {
        if (max == std::numeric_limits<double>::infinity()) {
            throw invalid_request(name, fmt::format("'{}' must be at least {}; got {}.", name, format_number(min),
                                                    format_number(d)));
        }
        throw invalid_request(name, fmt::format("'{}' must be between {} and {}; got {}.", name, format_number(min),
                                                format_number(max), format_number(d)));
    }
    return d;
}

std::optional<JsonFields> JsonFields::object(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_object()) wrong_type(key, "an object", *value);
    return JsonFields(*value, path(key));
}

const nlohmann::json* JsonFields::array(std::string_view key) const {
    const auto* value = find(key);
    if (value == nullptr) return nullptr;
    if (!value->is_array()) wrong_type(key, "an array", *value);
    return value;
}

}  // namespace msa::server
