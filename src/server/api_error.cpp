#include "server/api_error.h"

#include <fmt/format.h>

namespace msa::server {

ApiError::ApiError(int status, std::string type, const std::string& message, std::string param, std::string code)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json() const {
    nlohmann::json error = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) error["param"] = param_;
    if (!code_.empty()) error["code"] = code_;
    return nlohmann::json{{"error", std::move(error)}};
}

ApiError invalid_request(std::string param, const std::string& message, std::string code) {
    return ApiError(400, "invalid_request_error", message, std::move(param), std::move(code));
}

ApiError unsupported_parameter(std::string param, const std::string& message) {
    return ApiError(400, "invalid_request_error", message, std::move(param), "unsupported_parameter");
}

ApiError authentication_failed(const std::string& message) {
    return ApiError(401, "authentication_error", message, {}, "invalid_api_key");
}

ApiError not_found(const std::string& message, std::string param, std::string code) {
    return ApiError(404, "not_found_error", message, std::move(param), std::move(code));
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
    return ApiError(405, "invalid_request_error", fmt::format("Method {} is not allowed on {}.", method, path), {},
                    "method_not_allowed");
}

ApiError payload_too_large(std::size_t limit_bytes) {
    return ApiError(413, "invalid_request_error",
                    fmt::format("The request body is larger than the server's limit of {} bytes.", limit_bytes), {},
                    "request_too_large");
}

ApiError too_many_requests(const std::string& message) {
    return ApiError(429, "rate_limit_error", message, {}, "queue_full");
}

ApiError service_unavailable(const std::string& message) {
    return ApiError(503, "service_unavailable_error", message, {}, "service_unavailable");
}

ApiError internal_error(const std::string& message) { return ApiError(500, "server_error", message); }

}  // namespace msa::server
