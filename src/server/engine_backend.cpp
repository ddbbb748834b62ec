#include "server/engine_backend.h"

#include "core/error.h"
#include "core/log.h"
#include "engine/request_error.h"

#include <fmt/format.h>

namespace msa::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ApiError api_error_of(const RequestError& e) {
    switch (e.kind()) {
        case RequestErrorKind::queue_full:
            return too_many_requests(e.what());
        case RequestErrorKind::shutting_down:
            return service_unavailable(e.what());
        case RequestErrorKind::context_overflow:
            return invalid_request(e.param().empty() ? "messages" : e.param(), e.what(), "context_length_exceeded");
        case RequestErrorKind::invalid_request:
            break;
    }
    return invalid_request(e.param(), e.what());
}

// OpenAI has no "error" finish reason: a failed request ends as "abort" with an error attached.
const char* server_finish_reason(FinishReason reason) {
    return reason == FinishReason::error ? "abort" : finish_reason_name(reason);
}

ordered_json message_json(const ChatMessage& m) {
    ordered_json out = ordered_json::object();
    out["role"] = role_name(m.role);
    out["content"] = m.content ? ordered_json(*m.content) : ordered_json(nullptr);
    if (!m.name.empty()) out["name"] = m.name;
    if (!m.tool_call_id.empty()) out["tool_call_id"] = m.tool_call_id;
    if (m.reasoning) out["reasoning_content"] = *m.reasoning;
    if (!m.tool_calls.empty()) {
        ordered_json calls = ordered_json::array();
        for (const auto& c : m.tool_calls) {
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        out["tool_calls"] = std::move(calls);
    }
    return out;
}

}  // namespace

MarkerTextSource::MarkerTextSource(const TokenTextSource& base, const Tokenizer& tokenizer,
                                   const std::vector<std::string>& markers)
    : base_(base) {
    for (const auto& m : markers) {
        if (const auto id = tokenizer.token_to_id(m)) marker_ids_.insert(*id);
    }
}

std::vector<std::string> parser_marker_tokens() {
    return {"<mm:think>", "</mm:think>", "<think>", "</think>", "]<]minimax[>[", "<minimax:tool_call>",
            "</minimax:tool_call>"};
}

EngineBackend::EngineBackend(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                             const TokenTextSource& text, EngineBackendOptions options)
    : engine_(engine), tokenizer_(tokenizer), chat_template_(chat_template), text_(text), options_(std::move(options)) {}

ModelInfo EngineBackend::model_info() const {
    return {options_.served_name, options_.root, engine_.config().scheduler.max_model_len, options_.created};
}

std::vector<std::int32_t> EngineBackend::tokenize(std::string_view text, bool add_special_tokens) const {
    try {
        return tokenizer_.encode(text, add_special_tokens);
    } catch (const Error& e) {
        throw invalid_request("prompt", fmt::format("The text cannot be tokenized: {}", e.what()));
    }
}

std::string EngineBackend::detokenize(std::span<const std::int32_t> tokens) const {
    return tokenizer_.decode(tokens, false);
}

std::string EngineBackend::token_text(std::int32_t token) const { return std::string(text_.token_bytes(token)); }

std::int64_t EngineBackend::vocab_size() const {
    // Ids the tokenizer cannot produce (padding rows of the embedding) are still valid in logit_bias and
    // stop_token_ids; ids beyond either bound are not.
    return static_cast<std::int64_t>(tokenizer_.id_limit());
}

ChatRequest EngineBackend::chat_request(const ChatCompletionRequest& request) const {
    ChatRequest r;
    for (const auto& m : request.messages) r.messages.push_back(message_json(m));
    if (!request.tools.empty()) {
        r.tools = ordered_json::array();
        for (const auto& t : request.tools) {
            ordered_json fn = {{"name", t.name}};
            if (!t.description.empty()) fn["description"] = t.description;
            fn["parameters"] = ordered_json::parse(t.parameters.dump());
            r.tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
        }
    }
    r.add_generation_prompt = request.add_generation_prompt;
    r.continue_final_message = request.continue_final_message;
    r.template_kwargs = ordered_json::parse(request.chat_template_kwargs.dump());
    return r;
}

std::string EngineBackend::render_chat(const ChatCompletionRequest& request) const {
    try {
        return chat_template_.render(chat_request(request));
    } catch (const Error& e) {
        // The template's own raise_exception() messages ("roles must alternate", a bad thinking_mode) are the
        // client's problem; they name no internals.
        throw invalid_request("messages", fmt::format("The chat template rejected the conversation: {}", e.what()));
    }
}

SamplingParams EngineBackend::sampling_params(const SamplingOptions& o) const {
    SamplingParams p = options_.defaults;
    if (o.temperature) p.temperature = static_cast<float>(*o.temperature);
    if (o.top_p) p.top_p = static_cast<float>(*o.top_p);
    if (o.top_k) p.top_k = static_cast<std::int32_t>(*o.top_k);
    if (o.min_p) p.min_p = static_cast<float>(*o.min_p);
    if (o.repetition_penalty) p.repetition_penalty = static_cast<float>(*o.repetition_penalty);
    p.presence_penalty = static_cast<float>(o.presence_penalty.value_or(0.0));
    p.frequency_penalty = static_cast<float>(o.frequency_penalty.value_or(0.0));
    for (const auto& [id, bias] : o.logit_bias) p.logit_bias.emplace_back(static_cast<std::int32_t>(id), bias);
    p.seed = o.seed;
    p.stop = o.stop;
    for (const auto id : o.stop_token_ids) p.stop_token_ids.push_back(static_cast<std::int32_t>(id));
    p.include_stop_str_in_output = o.include_stop_str_in_output;
    p.ignore_eos = o.ignore_eos;
    if (o.max_tokens) p.max_tokens = static_cast<std::int32_t>(*o.max_tokens);
    p.min_tokens = static_cast<std::int32_t>(o.min_tokens);
    if (o.logprobs) p.logprobs = static_cast<std::int32_t>(*o.logprobs);
    p.skip_special_tokens = o.skip_special_tokens;
    return p;
}

std::uint64_t EngineBackend::submit(GenerationRequest request, GenerationCallback on_event) {
    GenerateRequest r;
    r.params = sampling_params(request.sampling);
    r.n = 1;
    r.cache_salt = request.sampling.cache_salt;
    r.external_id = request.request_id;
    const auto prompt_tokens = static_cast<std::int64_t>(request.prompt_tokens.size());
    r.prompt = std::move(request.prompt_tokens);
    try {
        auto callback = [this, prompt_tokens, id = request.request_id, cb = std::move(on_event)](RequestEvent&& e) {
            cb(convert(std::move(e), prompt_tokens, id));
        };
        return engine_.submit(std::move(r), std::move(callback))->id();
    } catch (const RequestError& e) {
        throw api_error_of(e);
    }
}

void EngineBackend::cancel(std::uint64_t handle) { engine_.cancel(handle); }

GenerationEvent EngineBackend::convert(RequestEvent&& e, std::int64_t prompt_tokens,
                                       const std::string& request_id) const {
    GenerationEvent out;
    out.prompt_tokens = prompt_tokens;
    for (auto& s : e.samples) {  // n = 1: at most one sample per event
        out.token_ids.insert(out.token_ids.end(), s.token_ids.begin(), s.token_ids.end());
        out.text += s.text;
        for (const auto& lp : s.logprobs) {
            TokenLogprob t{token_text(lp.token), lp.logprob, {}};
            t.top.reserve(lp.top_logprobs.size());
            for (const auto& alt : lp.top_logprobs) t.top.push_back({token_text(alt.token), alt.logprob});
            out.logprobs.push_back(std::move(t));
        }
        if (s.finish_reason) {
            out.finish_reason = server_finish_reason(*s.finish_reason);
            if (const auto* id = std::get_if<std::int32_t>(&s.stop_reason)) out.stop_reason = *id;
            if (const auto* str = std::get_if<std::string>(&s.stop_reason)) out.stop_reason = *str;
        }
    }
    if (e.finished) {
        out.finished = true;
        if (out.finish_reason.empty()) out.finish_reason = "abort";
        if (!e.error.empty()) {
            // The engine's message can name internals (a kernel, a page); the log has it, the client gets a 500.
            MSA_LOG_ERROR("request {} failed in the engine: {}", request_id, e.error);
            out.error = internal_error("The request failed in the engine.");
            out.finish_reason = "abort";
        }
        if (e.usage) out.cached_tokens = e.usage->cached_tokens;
        if (e.timings) out.timings = server::RequestTimings{e.timings->queue, e.timings->prefill, e.timings->decode};
    }
    return out;
}

BackendStats EngineBackend::stats() const {
    const EngineStats e = engine_.stats();
    BackendStats s;
    s.num_running = e.num_running;
    s.num_waiting = e.num_waiting;
    s.kv_cache_usage = e.kv_cache_usage;
    s.prefix_cache_queries = static_cast<std::uint64_t>(e.prefix_cache_queries);
    s.prefix_cache_hits = static_cast<std::uint64_t>(e.prefix_cache_hits);
    s.num_preemptions = static_cast<std::uint64_t>(e.num_preemptions);
    s.engine_generation_tokens = static_cast<std::uint64_t>(e.generation_tokens);
    s.spec_decode_num_drafts = static_cast<std::uint64_t>(e.spec_num_drafts);
    s.spec_decode_num_draft_tokens = static_cast<std::uint64_t>(e.spec_num_draft_tokens);
    s.spec_decode_num_accepted_tokens = static_cast<std::uint64_t>(e.spec_num_accepted_tokens);
    for (const auto v : e.spec_accepted_per_position) s.spec_decode_accepted_per_pos.push_back(static_cast<std::uint64_t>(v));
    return s;
}

}  // namespace msa::server
