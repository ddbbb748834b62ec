// Converts the raw text of a tool-call argument into JSON by the JSON-schema type of its parameter
// (api.md section 6): integer > number > boolean > object/array (parsed as JSON) > string, in that order of
// preference among the types the schema allows; the text `null` is JSON null; a parameter the schema does not
// know is a string; a known parameter without any type (schema {}) takes any JSON value and falls back to string.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace msa::server {

// The JSON types a schema allows, as a bit set. Looks at `type` (a name or a list), `enum`, `const`,
// `anyOf`/`oneOf`/`allOf` (their union), and infers object from `properties` and array from `items`.
struct SchemaTypes {
    enum : unsigned { string = 1, integer = 2, number = 4, boolean = 8, object = 16, array = 32, null = 64 };
    unsigned bits = 0;
    bool has(unsigned t) const { return (bits & t) != 0; }
    bool any() const { return bits == 0; }        // untyped: anything goes
    bool only_string() const { return bits == string; }
};
SchemaTypes schema_types(const nlohmann::json& schema);

// The schema of property `name` of an object schema (also through anyOf/oneOf/allOf and additionalProperties);
// nullptr when the schema does not describe it.
const nlohmann::json* property_schema(const nlohmann::json& object_schema, std::string_view name);
// The schema of the items of an array schema; nullptr when unknown.
const nlohmann::json* items_schema(const nlohmann::json& array_schema);

// Converts `raw` by `schema` (nullptr = unknown parameter -> string).
nlohmann::json convert_argument(std::string_view raw, const nlohmann::json* schema);

}  // namespace msa::server
