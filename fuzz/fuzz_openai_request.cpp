// Fuzz target: OpenAI request bodies through JSON parsing and every request validator. Any input must either
// parse or be rejected with a 400 ApiError carrying the full error envelope; nothing else may escape, crash or
// hang.
#include "server/openai_request.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

void check_error(const msa::server::ApiError& e) {
    const auto j = e.to_json();
    if (e.status() != 400 || !j.contains("error") || !j["error"]["message"].is_string() ||
        !j["error"]["type"].is_string() || !j["error"].contains("param") || !j["error"].contains("code")) {
        std::abort();
    }
}

template <typename Fn>
void guarded(Fn&& fn) {
    try {
        fn();
    } catch (const msa::server::ApiError& e) {
        check_error(e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    nlohmann::json json;
    try {
        json = msa::server::parse_json_body(body);
    } catch (const msa::server::ApiError& e) {
        check_error(e);
        return 0;
    }
    msa::server::RequestLimits limits;
    guarded([&] { msa::server::parse_chat_completion_request(json, limits); });
    limits.structured_output = true;
    guarded([&] { msa::server::parse_chat_completion_request(json, limits); });
    guarded([&] { msa::server::parse_completion_request(json, limits); });
    guarded([&] { msa::server::parse_tokenize_request(json, limits); });
    guarded([&] { msa::server::parse_detokenize_request(json); });
    return 0;
}
