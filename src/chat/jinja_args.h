// Argument binding helpers for the builtins (filters, tests, methods, globals): Python-style positional/keyword
// parameters with defaults, and the integer/string coercions Python applies to them.
#pragma once

#include "chat/jinja_error.h"
#include "chat/jinja_value.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace msa::jinja {

class ArgReader {
public:
    ArgReader(CallArgs& args, std::string callee) : args_(args), callee_(std::move(callee)) {}

    // The argument bound to parameter `pos`/`name`, or nullptr.
    const Value* opt(std::size_t pos, std::string_view name) { return args_.get(pos, name); }
    Value get(std::size_t pos, std::string_view name, Value fallback) {
        const Value* v = opt(pos, name);
        return v != nullptr ? *v : std::move(fallback);
    }
    const Value& required(std::size_t pos, std::string_view name) {
        const Value* v = opt(pos, name);
        if (v == nullptr) {
            raise("{}() missing required argument '{}'", callee_, name);
        }
        return *v;
    }
    // Positional arguments from `pos` on (a *args parameter).
    List rest(std::size_t pos) {
        List out;
        for (std::size_t i = pos; i < args_.positional.size(); ++i) {
            args_.get(i, "");
            out.push_back(args_.positional[i]);
        }
        return out;
    }
    // Throws for arguments no parameter took.
    void done() const { args_.check_consumed(callee_); }
    const std::string& callee() const { return callee_; }

private:
    CallArgs& args_;
    std::string callee_;
};

// Python's __index__ coercion (bool and int only).
inline std::int64_t to_index(const Value& v) {
    if (v.is_integral()) {
        return v.as_int();
    }
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    raise("'{}' object cannot be interpreted as an integer", python_type_name(v));
}

// A str argument (or None for "not given").
inline std::optional<std::string> opt_str(const Value* v, std::string_view what) {
    if (v == nullptr || v->is_none()) {
        return std::nullopt;
    }
    if (!v->is_string()) {
        raise("{} must be str or None, not {}", what, python_type_name(*v));
    }
    return v->as_string();
}

inline const std::string& req_str(const Value& v, std::string_view what) {
    if (!v.is_string()) {
        raise("{} must be str, not {}", what, python_type_name(v));
    }
    return v.as_string();
}

}  // namespace msa::jinja
