// The HTTP routes of api.md section 1, written against ServingBackend:
//   POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics,
//   POST /tokenize, POST /detokenize.
// Generation requests are validated completely before anything is submitted, generate n sequences through a
// GenerationSession, and answer as one JSON response or as a Server-Sent Events stream (role chunk, deltas,
// finish chunk per choice, optional usage chunk, [DONE]; errors after the headers as a data frame, then [DONE];
// `: ping` comments while nothing else is sent). A client that goes away cancels its sequences at once.
#pragma once

#include "server/generation_session.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_ids.h"
#include "server/serving_backend.h"
#include "server/serving_metrics.h"

#include <chrono>
#include <string>

namespace msa::server {

struct ServingOptions {
    std::string reasoning_parser;          // "" = none; minimax_m3 | minimax_m2
    std::string tool_call_parser;          // "" = none; minimax_m3 | minimax_m2
    ReasoningFields reasoning_fields = ReasoningFields::both;
    nlohmann::json default_chat_template_kwargs = nlohmann::json::object();
    RequestLimits limits;
    std::chrono::milliseconds ping_interval{15000};  // SSE keep-alive comments while nothing else is sent
    std::chrono::milliseconds poll_interval{100};    // how often a waiting request checks on its client
    IdGenerator tool_call_ids;             // tests make ids deterministic; default random
};

class OpenAIRoutes {
public:
    // The backend and metrics must outlive the routes. Throws msa::Error on unknown parser names.
    OpenAIRoutes(ServingBackend& backend, ServingMetrics& metrics, ServingOptions options);

    void register_routes(HttpServer& server);

    HttpResponse chat_completions(const HttpRequest& request, const ClientConnection& connection);
    HttpResponse completions(const HttpRequest& request, const ClientConnection& connection);
    HttpResponse models() const;
    HttpResponse health() const;
    HttpResponse metrics() const;
    HttpResponse tokenize(const HttpRequest& request) const;
    HttpResponse detokenize(const HttpRequest& request) const;

private:
    void check_model(const std::string& model) const;
    void check_ready() const;
    // max_tokens for a prompt of `prompt_len` tokens (the rest of the context when not asked for), or the
    // context-overflow 400 naming `param`.
    std::int64_t resolve_max_tokens(std::int64_t prompt_len, std::optional<std::int64_t> requested,
                                    const char* param) const;
    std::vector<std::int32_t> checked_token_ids(const std::vector<std::int64_t>& ids, const std::string& param) const;

    ServingBackend& backend_;
    ServingMetrics& metrics_;
    ServingOptions options_;
};

}  // namespace msa::server
