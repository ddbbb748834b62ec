// OpenAIRoutes: construction, route registration and the non-generating routes (models, health, metrics,
// tokenize, detokenize), plus checks shared by the generating ones.
#include "server/openai_routes.h"

#include "core/error.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

#include <fmt/format.h>

namespace msa::server {

using nlohmann::json;

OpenAIRoutes::OpenAIRoutes(ServingBackend& backend, ServingMetrics& metrics, ServingOptions options)
    : backend_(backend), metrics_(metrics), options_(std::move(options)) {
    if (!options_.reasoning_parser.empty()) reasoning_markers(options_.reasoning_parser);  // throws when unknown
    if (!options_.tool_call_parser.empty()) tool_call_format(options_.tool_call_parser);
    if (!options_.default_chat_template_kwargs.is_object()) {
        fail("--default-chat-template-kwargs must be a JSON object.");
    }
}

void OpenAIRoutes::register_routes(HttpServer& server) {
    const auto counted = [this](std::string route, auto fn) {
        return [this, route = std::move(route), fn](const HttpRequest& r, const ClientConnection& c) {
            HttpResponse response = fn(r, c);
            metrics_.record_http(route, response.status);
            return response;
        };
    };
    server.post("/v1/chat/completions", counted("/v1/chat/completions", [this](const HttpRequest& r, const ClientConnection& c) {
        try {
            return chat_completions(r, c);
        } catch (const ApiError& e) {
            return HttpResponse::error(e);
        }
    }));
    server.post("/v1/completions", counted("/v1/completions", [this](const HttpRequest& r, const ClientConnection& c) {
        try {
            return completions(r, c);
        } catch (const ApiError& e) {
            return HttpResponse::error(e);
        }
    }));
    server.get("/v1/models", counted("/v1/models", [this](const HttpRequest&, const ClientConnection&) { return models(); }));
    server.get("/health", [this](const HttpRequest&, const ClientConnection&) { return health(); });
    server.get("/metrics", [this](const HttpRequest&, const ClientConnection&) { return metrics(); });
    server.post("/tokenize", counted("/tokenize", [this](const HttpRequest& r, const ClientConnection&) {
        try {
            return tokenize(r);
        } catch (const ApiError& e) {
            return HttpResponse::error(e);
        }
    }));
    server.post("/detokenize", counted("/detokenize", [this](const HttpRequest& r, const ClientConnection&) {
        try {
            return detokenize(r);
        } catch (const ApiError& e) {
            return HttpResponse::error(e);
        }
    }));
}

void OpenAIRoutes::check_ready() const {
    if (!backend_.ready()) throw service_unavailable("The model is still loading.");
}

void OpenAIRoutes::check_model(const std::string& model) const {
    if (model.empty()) return;
    const auto info = backend_.model_info();
    if (model != info.served_name) {
        throw not_found(fmt::format("The model '{}' does not exist; this server serves '{}'.", model, info.served_name),
                        "model", "model_not_found");
    }
}

std::int64_t OpenAIRoutes::resolve_max_tokens(std::int64_t prompt_len, std::optional<std::int64_t> requested,
                                              const char* param) const {
    const std::int64_t limit = backend_.model_info().max_model_len;
    if (limit <= 0) return requested.value_or(16);
    const std::int64_t completion = requested.value_or(std::max<std::int64_t>(limit - prompt_len, 0));
    if (prompt_len >= limit || prompt_len + completion > limit) {
        const char* where = std::string_view(param) == "messages" ? "messages" : "prompt";
        throw invalid_request(param,
                              fmt::format("This model's maximum context length is {} tokens. However, you requested "
                                          "{} tokens ({} in the {}, {} in the completion). Please reduce the length "
                                          "of the {} or completion.",
                                          limit, prompt_len + std::max<std::int64_t>(completion, 1), prompt_len, where,
                                          std::max<std::int64_t>(completion, 1), where),
                              "context_length_exceeded");
    }
    return completion;
}

std::vector<std::int32_t> OpenAIRoutes::checked_token_ids(const std::vector<std::int64_t>& ids,
                                                         const std::string& param) const {
    const std::int64_t vocab = backend_.vocab_size();
    std::vector<std::int32_t> out;
    out.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (vocab > 0 && ids[i] >= vocab) {
            throw invalid_request(fmt::format("{}[{}]", param, i),
                                  fmt::format("Token id {} is out of range: the vocabulary has {} tokens.", ids[i],
                                              vocab));
        }
        out.push_back(static_cast<std::int32_t>(ids[i]));
    }
    return out;
}

HttpResponse OpenAIRoutes::models() const {
    const auto info = backend_.model_info();
    ModelCard card;
    card.id = info.served_name;
    card.created = info.created;
    card.root = info.root;
    card.max_model_len = info.max_model_len;
    return HttpResponse::json(200, models_list({card}));
}

HttpResponse OpenAIRoutes::health() const {
    if (!backend_.ready()) return HttpResponse::error(service_unavailable("The model is still loading."));
    return HttpResponse::json(200, {{"status", "ok"}});
}

HttpResponse OpenAIRoutes::metrics() const {
    return HttpResponse::text(200, metrics_.render(), std::string(kPrometheusContentType));
}

HttpResponse OpenAIRoutes::tokenize(const HttpRequest& http) const {
    check_ready();
    const TokenizeRequest request = parse_tokenize_request(parse_json_body(http.body), options_.limits);
    check_model(request.model);
    std::string text;
    if (request.prompt) {
        text = *request.prompt;
    } else {
        ChatCompletionRequest chat = *request.chat;
        for (auto it = options_.default_chat_template_kwargs.begin(); it != options_.default_chat_template_kwargs.end();
             ++it) {
            if (!chat.chat_template_kwargs.contains(it.key())) chat.chat_template_kwargs[it.key()] = it.value();
        }
        text = backend_.render_chat(chat);
    }
    const auto tokens = backend_.tokenize(text, request.add_special_tokens);
    json out = {{"count", tokens.size()}, {"max_model_len", backend_.model_info().max_model_len}, {"tokens", tokens}};
    if (request.return_token_strs) {
        json strs = json::array();
        for (const auto t : tokens) strs.push_back(backend_.token_text(t));
        out["token_strs"] = std::move(strs);
    }
    return HttpResponse::json(200, out);
}

HttpResponse OpenAIRoutes::detokenize(const HttpRequest& http) const {
    check_ready();
    const DetokenizeRequest request = parse_detokenize_request(parse_json_body(http.body));
    check_model(request.model);
    const auto ids = checked_token_ids(request.tokens, "tokens");
    return HttpResponse::json(200, {{"prompt", backend_.detokenize(ids)}});
}

}  // namespace msa::server
