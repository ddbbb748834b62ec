// The OpenAI error envelope (api.md section 4): every error the server answers with, on every route and inside
// streams, is an ApiError rendered as {"error": {"message", "type", "param", "code"}} with the matching HTTP status.
// Nothing else is ever sent as an error body (no bare strings, no stack traces).
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace msa::server {

class ApiError : public std::runtime_error {
public:
    // status: HTTP status; type: OpenAI error type; param: the request field at fault ("" = null);
    // code: a short machine-readable code ("" = null).
    ApiError(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {});

    int status() const { return status_; }
    const std::string& type() const { return type_; }
    const std::string& param() const { return param_; }
    const std::string& code() const { return code_; }

    // {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
    nlohmann::json to_json() const;
    std::string body() const { return to_json().dump(); }

private:
    int status_;
    std::string type_;
    std::string param_;
    std::string code_;
};

// 400 invalid_request_error naming the field at fault.
ApiError invalid_request(std::string param, const std::string& message, std::string code = {});
// 400 for a field we recognise but do not implement (code "unsupported_parameter").
ApiError unsupported_parameter(std::string param, const std::string& message);
// 401 authentication_error.
ApiError authentication_failed(const std::string& message);
// 404 not_found_error (unknown route or model; code "model_not_found" for models).
ApiError not_found(const std::string& message, std::string param = {}, std::string code = {});
// 405 invalid_request_error for a known route used with the wrong method.
ApiError method_not_allowed(const std::string& method, const std::string& path);
// 413 invalid_request_error: the request body exceeds the configured limit.
ApiError payload_too_large(std::size_t limit_bytes);
// 429 rate_limit_error: admission queue full.
ApiError too_many_requests(const std::string& message);
// 503 service_unavailable_error: loading, shutting down, or the engine cannot take work.
ApiError service_unavailable(const std::string& message);
// 500 server_error; the message is for the client, so it never carries internals.
ApiError internal_error(const std::string& message);

}  // namespace msa::server
