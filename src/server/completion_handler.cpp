// POST /v1/completions: raw prompts (text or token ids, one or a batch), n choices each, optional echo.
#include "server/generation_stream.h"
#include "server/openai_routes.h"
#include "server/request_ids.h"

#include <fmt/format.h>

namespace msa::server {

using nlohmann::json;

namespace {

// Accumulates one completion choice.
struct CompletionOutput {
    int index = 0;
    std::string echo;                    // the prompt text, sent first when echo is on
    bool echo_sent = false;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::vector<std::int32_t> token_ids;
    std::int64_t tokens = 0;
    std::int64_t text_chars = 0;         // characters sent so far (text_offset of the next logprob)
    bool finished = false;
    std::string finish_reason = "stop";
    json stop_reason = nullptr;
    std::optional<ApiError> error;
};

std::int64_t char_count(std::string_view s) {
    std::int64_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

struct CompletionPlan {
    CompletionResponseBuilder builder;
    std::vector<CompletionOutput> outputs;
    std::size_t choices_per_prompt = 1;
    bool logprobs = false;
    bool return_token_ids = false;
    bool include_usage = false;
    bool continuous_usage = false;
};

Usage completion_usage(const CompletionPlan& plan, const GenerationSession& session) {
    Usage usage;
    for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
        usage.completion_tokens += plan.outputs[i].tokens;
        if (i % plan.choices_per_prompt == 0) {
            usage.prompt_tokens += session.prompt_tokens(static_cast<int>(i));
            usage.cached_tokens += session.cached_tokens(static_cast<int>(i));
        }
    }
    return usage;
}

// Applies one event to a choice; returns the text to send now (echo included) and its logprobs.
std::pair<std::string, json> apply_event(CompletionPlan& plan, CompletionOutput& o, const GenerationEvent& e) {
    std::string piece;
    if (!o.echo_sent) {
        o.echo_sent = true;
        piece = o.echo;
        o.text += o.echo;
    }
    json logprobs = nullptr;
    if (plan.logprobs) {
        logprobs = completion_logprobs(e.logprobs, o.text_chars + char_count(piece));
        o.logprobs.insert(o.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    }
    piece += e.text;
    o.text += e.text;
    o.text_chars += char_count(piece);
    o.tokens += static_cast<std::int64_t>(e.token_ids.size());
    if (plan.return_token_ids) o.token_ids.insert(o.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    if (e.finished) {
        o.finished = true;
        o.finish_reason = e.finish_reason.empty() ? "stop" : e.finish_reason;
        o.stop_reason = e.stop_reason;
        o.error = e.error;
    }
    return {piece, logprobs};
}

class CompletionStream final : public GenerationStream {
public:
    CompletionStream(std::shared_ptr<GenerationSession> session, CompletionPlan plan, const ServingOptions& options)
        : GenerationStream(std::move(session), options.ping_interval, options.poll_interval), plan_(std::move(plan)) {}

private:
    void on_events(std::vector<ChoiceEvent>& events, SseWriter& out) override {
        for (auto& [choice, event] : events) {
            auto& o = plan_.outputs.at(choice);
            if (o.finished) continue;
            auto [text, logprobs] = apply_event(plan_, o, event);
            if (!text.empty() || (plan_.logprobs && !event.logprobs.empty())) {
                json chunk = plan_.builder.chunk(choice, text, logprobs, std::nullopt);
                if (plan_.return_token_ids) chunk["choices"][0]["token_ids"] = event.token_ids;
                if (plan_.continuous_usage) chunk["usage"] = completion_usage(plan_, session()).to_json();
                out.event(chunk);
            }
            if (o.finished && !o.error) {
                out.event(plan_.builder.chunk(choice, "", nullptr, o.finish_reason, o.stop_reason));
            }
        }
    }

    std::string on_complete(SseWriter& out) override {
        for (const auto& o : plan_.outputs) {
            if (o.error) {
                out.event(o.error->to_json());
                return "error";
            }
        }
        if (plan_.include_usage) out.event(plan_.builder.usage_chunk(completion_usage(plan_, session())));
        return plan_.outputs.front().finish_reason;
    }

    CompletionPlan plan_;
};

}  // namespace

HttpResponse OpenAIRoutes::completions(const HttpRequest& http, const ClientConnection& connection) {
    const auto arrival = GenerationSession::Clock::now();
    check_ready();
    const CompletionRequest request = parse_completion_request(parse_json_body(http.body), options_.limits);
    check_model(request.model);

    const std::string id = request.request_id.empty() ? completion_id() : "cmpl-" + request.request_id;
    CompletionPlan plan{CompletionResponseBuilder(id, unix_time_now(), request.model.empty()
                                                                           ? backend_.model_info().served_name
                                                                           : request.model),
                        {},
                        static_cast<std::size_t>(request.n),
                        request.sampling.logprobs.has_value(),
                        request.return_token_ids,
                        request.stream_options.include_usage,
                        request.stream_options.continuous_usage_stats};
    std::vector<GenerationRequest> sequences;
    for (std::size_t p = 0; p < request.prompts.size(); ++p) {
        const auto& prompt = request.prompts[p];
        const std::string param = request.prompts.size() > 1 ? fmt::format("prompt[{}]", p) : "prompt";
        std::vector<std::int32_t> tokens = prompt.text ? backend_.tokenize(*prompt.text, true)
                                                       : checked_token_ids(prompt.token_ids, param);
        if (tokens.empty()) throw invalid_request(param, "The prompt must not be empty.");
        const std::int64_t max_tokens =
            resolve_max_tokens(static_cast<std::int64_t>(tokens.size()), request.sampling.max_tokens, "prompt");
        const std::string echo = request.echo ? (prompt.text ? *prompt.text : backend_.detokenize(tokens)) : "";
        for (std::int64_t i = 0; i < request.n; ++i) {
            GenerationRequest seq;
            seq.request_id = fmt::format("{}-{}-{}", id, p, i);
            seq.prompt_tokens = tokens;
            seq.sampling = request.sampling;
            seq.sampling.max_tokens = max_tokens;
            if (seq.sampling.seed) *seq.sampling.seed += static_cast<std::uint64_t>(i);
            sequences.push_back(std::move(seq));
            CompletionOutput o;
            o.index = static_cast<int>(plan.outputs.size());
            o.echo = echo;
            plan.outputs.push_back(std::move(o));
        }
    }

    auto session = std::make_shared<GenerationSession>(backend_, metrics_, arrival);
    session->start(std::move(sequences), static_cast<std::size_t>(request.n));
    if (request.stream) {
        return HttpResponse::event_stream(std::make_shared<CompletionStream>(session, std::move(plan), options_));
    }

    while (!session->all_finished()) {
        if (connection.cancelled()) {
            session->cancel_all();
            session->record("abort");
            throw service_unavailable(connection.closed() ? "The client disconnected." : "The server is shutting down.");
        }
        for (auto& [choice, event] : session->wait(options_.poll_interval)) {
            auto& o = plan.outputs.at(choice);
            if (!o.finished) apply_event(plan, o, event);
        }
    }
    std::vector<CompletionChoice> choices;
    for (const auto& o : plan.outputs) {
        if (o.error) {
            session->record("error");
            throw *o.error;
        }
        CompletionChoice c;
        c.index = o.index;
        c.text = o.text;
        c.finish_reason = o.finish_reason;
        c.stop_reason = o.stop_reason;
        if (plan.logprobs) c.logprobs = completion_logprobs(o.logprobs, char_count(o.echo));
        if (plan.return_token_ids) c.token_ids = o.token_ids;
        choices.push_back(std::move(c));
    }
    session->record(plan.outputs.front().finish_reason);
    return HttpResponse::json(200, plan.builder.response(choices, completion_usage(plan, *session)));
}

}  // namespace msa::server
