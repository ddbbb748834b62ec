// Errors the engine reports about one request, typed so that the server can map them to HTTP statuses:
// invalid_request and context_overflow -> 400 (with `param`), queue_full -> 429, shutting_down -> 503.
#pragma once

#include "core/error.h"

#include <string>

namespace msa {

enum class RequestErrorKind { invalid_request, context_overflow, queue_full, shutting_down };

class RequestError : public Error {
public:
    RequestError(RequestErrorKind kind, std::string param, const std::string& message)
        : Error(message), kind_(kind), param_(std::move(param)) {}

    RequestErrorKind kind() const { return kind_; }
    // The request field at fault ("temperature", "max_tokens", "messages", ...), empty when none applies.
    const std::string& param() const { return param_; }

private:
    RequestErrorKind kind_;
    std::string param_;
};

// Throws RequestError{invalid_request, param} with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void reject_request(std::string param, fmt::format_string<Args...> format, Args&&... args) {
    throw RequestError(RequestErrorKind::invalid_request, std::move(param),
                       fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace msa
