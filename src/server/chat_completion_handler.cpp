// POST /v1/chat/completions.
#include "server/chat_choice_output.h"
#include "server/generation_stream.h"
#include "server/openai_routes.h"
#include "server/request_ids.h"
#include "server/tool_choice_policy.h"

#include <fmt/format.h>

namespace msa::server {

using nlohmann::json;

namespace {

// Everything a chat response needs besides the generated text.
struct ChatPlan {
    ChatResponseBuilder builder;
    std::vector<ChatChoiceOutput> outputs;
    ToolChoice tool_choice;
    bool check_tool_choice = false;
    bool include_usage = false;
    bool continuous_usage = false;
    bool return_token_ids = false;
    std::vector<std::int32_t> prompt_tokens;
    // The tool definitions the parsers read; shared so that they live as long as the plan, wherever it moves.
    std::shared_ptr<const std::vector<ToolDefinition>> tools;
};

Usage chat_usage(const ChatPlan& plan, const GenerationSession& session) {
    Usage usage;
    usage.prompt_tokens = session.prompt_tokens(0);
    usage.cached_tokens = session.cached_tokens(0);
    bool has_reasoning = false;
    for (const auto& o : plan.outputs) {
        usage.completion_tokens += o.completion_tokens();
        has_reasoning = has_reasoning || o.has_reasoning_parser();
    }
    if (has_reasoning) {
        usage.reasoning_tokens = 0;
        for (const auto& o : plan.outputs) *usage.reasoning_tokens += o.reasoning_tokens();
    }
    return usage;
}

// The first error among finished choices: a failed sequence, or tool_choice not satisfied.
std::optional<ApiError> chat_error(const ChatPlan& plan) {
    for (const auto& o : plan.outputs) {
        if (o.error()) return o.error();
    }
    if (plan.check_tool_choice) {
        for (const auto& o : plan.outputs) {
            if (o.finish_reason() == "length") continue;  // cut short: the call may not have been reached
            if (auto e = check_tool_choice(plan.tool_choice, o.tool_calls())) return e;
        }
    }
    return std::nullopt;
}

class ChatStream final : public GenerationStream {
public:
    ChatStream(std::shared_ptr<GenerationSession> session, ChatPlan plan, const ServingOptions& options)
        : GenerationStream(std::move(session), options.ping_interval, options.poll_interval),
          plan_(std::move(plan)),
          role_sent_(plan_.outputs.size(), false) {}

private:
    void on_events(std::vector<ChoiceEvent>& events, SseWriter& out) override {
        for (auto& [choice, event] : events) {
            auto& output = plan_.outputs.at(choice);
            if (output.finished()) continue;
            if (!role_sent_[choice]) {
                role_sent_[choice] = true;
                out.event(plan_.builder.role_chunk(choice));
            }
            const ChatDelta delta = output.add(event);
            if (!delta.empty() || delta.has_logprobs || !delta.token_ids.empty()) {
                json chunk = plan_.builder.delta_chunk(choice, delta);
                if (plan_.continuous_usage) chunk["usage"] = chat_usage(plan_, session()).to_json();
                out.event(chunk);
            }
            if (output.finished() && !output.error()) {
                out.event(plan_.builder.finish_chunk(choice, output.finish_reason(), output.stop_reason()));
            }
        }
    }

    std::string on_complete(SseWriter& out) override {
        if (auto error = chat_error(plan_)) {
            out.event(error->to_json());
            return "error";
        }
        if (plan_.include_usage) out.event(plan_.builder.usage_chunk(chat_usage(plan_, session())));
        return plan_.outputs.front().finish_reason();
    }

    ChatPlan plan_;
    std::vector<bool> role_sent_;
};

std::string thinking_mode_of(const json& kwargs) {
    if (const auto it = kwargs.find("thinking_mode"); it != kwargs.end() && it->is_string()) return it->get<std::string>();
    return {};
}

}  // namespace

HttpResponse OpenAIRoutes::chat_completions(const HttpRequest& http, const ClientConnection& connection) {
    const auto arrival = GenerationSession::Clock::now();
    check_ready();
    ChatCompletionRequest request = parse_chat_completion_request(parse_json_body(http.body), options_.limits);
    check_model(request.model);

    // Server defaults for the template, then what the request says; reasoning_effort "none" turns M3 thinking off
    // unless the request chose a thinking_mode itself.
    const bool request_sets_mode = request.chat_template_kwargs.contains("thinking_mode");
    for (auto it = options_.default_chat_template_kwargs.begin(); it != options_.default_chat_template_kwargs.end();
         ++it) {
        if (!request.chat_template_kwargs.contains(it.key())) request.chat_template_kwargs[it.key()] = it.value();
    }
    if (request.reasoning_effort == "none" && options_.reasoning_parser == "minimax_m3" && !request_sets_mode) {
        request.chat_template_kwargs["thinking_mode"] = "disabled";
    }
    const ThinkingMode mode = parse_thinking_mode(thinking_mode_of(request.chat_template_kwargs));

    std::string prompt = backend_.render_chat(request);
    const bool starts_in_reasoning =
        !options_.reasoning_parser.empty() && generation_starts_in_reasoning(options_.reasoning_parser, prompt, mode);
    std::optional<ToolCallFormat> format;
    if (!options_.tool_call_parser.empty()) format = tool_call_format(options_.tool_call_parser);
    const ToolCallPlan tools = plan_tool_calls(request, format, starts_in_reasoning);
    prompt += tools.forced_prefix;

    const auto prompt_tokens = backend_.tokenize(prompt, false);
    const std::int64_t max_tokens =
        resolve_max_tokens(static_cast<std::int64_t>(prompt_tokens.size()), request.sampling.max_tokens, "messages");

    ChatOutputOptions output_options;
    output_options.reasoning_parser = options_.reasoning_parser;
    output_options.prompt = prompt;
    output_options.thinking_mode = mode;
    output_options.include_reasoning = request.include_reasoning;
    if (tools.parse) output_options.tool_format = format;
    output_options.tools = &request.tools;
    output_options.max_tool_calls = tools.max_calls;
    output_options.forced_prefix = tools.forced_prefix;
    output_options.logprobs = request.logprobs;
    output_options.return_token_ids = request.return_token_ids;
    output_options.ids = options_.tool_call_ids;

    const std::string id = request.request_id.empty() ? chat_completion_id() : "chatcmpl-" + request.request_id;
    ChatPlan plan{ChatResponseBuilder(id, unix_time_now(), request.model.empty() ? backend_.model_info().served_name
                                                                                  : request.model,
                                      options_.reasoning_fields),
                  {},
                  request.tool_choice,
                  tools.check_after,
                  request.stream_options.include_usage,
                  request.stream_options.continuous_usage_stats,
                  request.return_token_ids,
                  prompt_tokens,
                  std::make_shared<const std::vector<ToolDefinition>>(request.tools)};
    output_options.tools = plan.tools.get();

    std::vector<GenerationRequest> sequences;
    for (std::int64_t i = 0; i < request.n; ++i) {
        GenerationRequest seq;
        seq.request_id = fmt::format("{}-{}", id, i);
        seq.prompt_tokens = prompt_tokens;
        seq.sampling = request.sampling;
        seq.sampling.max_tokens = max_tokens;
        if (seq.sampling.seed) *seq.sampling.seed += static_cast<std::uint64_t>(i);  // n samples, not n copies
        sequences.push_back(std::move(seq));
        plan.outputs.emplace_back(static_cast<int>(i), output_options);
    }

    auto session = std::make_shared<GenerationSession>(backend_, metrics_, arrival);
    session->start(std::move(sequences), static_cast<std::size_t>(request.n));

    if (request.stream) return HttpResponse::event_stream(std::make_shared<ChatStream>(session, std::move(plan), options_));

    while (!session->all_finished()) {
        if (connection.cancelled()) {
            session->cancel_all();
            session->record("abort");
            throw service_unavailable(connection.closed() ? "The client disconnected." : "The server is shutting down.");
        }
        for (auto& [choice, event] : session->wait(options_.poll_interval)) plan.outputs.at(choice).add(event);
    }
    if (auto error = chat_error(plan)) {
        session->record("error");
        throw *error;
    }
    std::vector<ChatChoice> choices;
    for (const auto& o : plan.outputs) choices.push_back(o.result());
    session->record(plan.outputs.front().finish_reason());
    std::optional<std::vector<std::int32_t>> prompt_ids;
    if (request.return_token_ids) prompt_ids = prompt_tokens;
    return HttpResponse::json(200, plan.builder.response(choices, chat_usage(plan, *session), prompt_ids));
}

}  // namespace msa::server
