// The contract between the HTTP handlers and whatever generates text. The handlers (openai_routes.h) only talk to
// this interface; `msa serve` plugs in the engine (with its tokenizer and chat template), tests plug in a fake
// that streams scripted text.
//
// Threading: submit() and cancel() may be called from any HTTP thread. Events are delivered through the callback
// on the backend's own thread; the callback only queues them (it never blocks), and the HTTP thread that owns
// the request does the parsing and writing.
#pragma once

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server {

struct ModelInfo {
    std::string served_name;                 // the id clients send as `model`
    std::string root;                        // model directory (shown in /v1/models)
    std::int64_t max_model_len = 0;          // context length in tokens
    std::int64_t created = 0;                // unix time the server started
};

// Gauges and engine-side counters for /metrics (monotonic counters are totals since start).
struct BackendStats {
    std::int64_t num_running = 0;
    std::int64_t num_waiting = 0;
    double kv_cache_usage = 0.0;             // 0..1
    std::uint64_t prefix_cache_queries = 0;  // tokens looked up in the prefix cache
    std::uint64_t prefix_cache_hits = 0;     // tokens found
    std::uint64_t num_preemptions = 0;
    // Tokens the engine sampled, those of requests cancelled before the client read them included (the
    // vllm:generation_tokens_total counter counts what requests delivered).
    std::uint64_t engine_generation_tokens = 0;
    std::uint64_t spec_decode_num_drafts = 0;
    std::uint64_t spec_decode_num_draft_tokens = 0;
    std::uint64_t spec_decode_num_accepted_tokens = 0;
    std::vector<std::uint64_t> spec_decode_accepted_per_pos;
};

// One sequence to generate.
struct GenerationRequest {
    std::string request_id;                  // for logs and the engine's own bookkeeping
    std::vector<std::int32_t> prompt_tokens;
    SamplingOptions sampling;                // max_tokens resolved by the handler (never unset here)
    // Text the model must continue from that is not in `prompt_tokens`' rendering: none today; tool_choice
    // forcing appends its prefix to the prompt before tokenizing.
};

// Engine-side timings of a finished request, in seconds (for the latency histograms).
struct RequestTimings {
    double queue = 0.0;                      // arrival at the engine -> first scheduled
    double prefill = 0.0;                    // first scheduled -> first token
    double decode = 0.0;                     // first token -> last token
};

struct GenerationEvent {
    std::vector<std::int32_t> token_ids;     // tokens generated since the last event
    // Their text, detokenized incrementally (never a broken UTF-8 character). It must include the text of the
    // reasoning and tool-call marker tokens even when they are special tokens: the parsers work on text.
    std::string text;
    std::vector<TokenLogprob> logprobs;      // one per token when logprobs were asked for
    std::int64_t prompt_tokens = 0;          // set on the first event at least
    std::int64_t cached_tokens = 0;          // prompt tokens found in the prefix cache (first event at least)
    bool finished = false;
    std::string finish_reason;               // finished: "stop", "length" or "abort"
    nlohmann::json stop_reason = nullptr;    // finished by a stop string (the string) or stop token (its id)
    std::optional<ApiError> error;           // finished because the request failed
    std::optional<RequestTimings> timings;   // on the finishing event, when the backend measures them
};

using GenerationCallback = std::function<void(GenerationEvent&&)>;

class ServingBackend {
public:
    virtual ~ServingBackend() = default;

    virtual ModelInfo model_info() const = 0;
    // False while the model is still loading (/health answers 503, generation requests 503).
    virtual bool ready() const = 0;

    virtual std::vector<std::int32_t> tokenize(std::string_view text, bool add_special_tokens) const = 0;
    virtual std::string detokenize(std::span<const std::int32_t> tokens) const = 0;
    // The text of one token (its bytes; may be a partial UTF-8 sequence).
    virtual std::string token_text(std::int32_t token) const = 0;
    virtual std::int64_t vocab_size() const = 0;

    // Renders the conversation through the model's chat template (with tools, add_generation_prompt,
    // continue_final_message and chat_template_kwargs); throws ApiError 400 when the template rejects it.
    virtual std::string render_chat(const ChatCompletionRequest& request) const = 0;

    // Starts generating one sequence; returns a handle for cancel(). Events arrive through `on_event` until one
    // with finished=true (always exactly one, also after cancel()). Throws ApiError: 400 for a prompt the
    // engine rejects (context overflow uses OpenAI's message), 429 when the admission queue is full, 503 when
    // shutting down.
    virtual std::uint64_t submit(GenerationRequest request, GenerationCallback on_event) = 0;
    // Stops a sequence and frees its resources at once; idempotent; unknown handles are ignored.
    virtual void cancel(std::uint64_t handle) = 0;

    virtual BackendStats stats() const = 0;
};

}  // namespace msa::server
