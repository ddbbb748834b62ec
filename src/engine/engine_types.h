// The values that cross the engine API: a generation request, the events streamed back for it, and the engine's
// statistics. Kept free of any server or tokenizer type so that the CLI and the server share them.
#pragma once

#include "engine/histogram.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace msa {

using EngineClock = std::chrono::steady_clock;

struct GenerateRequest {
    std::vector<std::int32_t> prompt;  // token ids (already templated and tokenized)
    SamplingParams params;
    std::int32_t n = 1;       // independent samples sharing the prompt's KV pages
    std::string cache_salt;   // prefix-cache isolation: requests only share cached blocks with equal salts
    std::string external_id;  // the server's request id, for logs only
    // When the request reached the server (TTFT and queue time are measured from here); default: submit time.
    std::optional<EngineClock::time_point> arrival_time;
};

enum class FinishReason { stop, length, abort, error };
// "stop", "length", "abort", "error" (vLLM's finished_reason label values).
const char* finish_reason_name(FinishReason reason);

// What one of the n samples produced since the previous event.
struct SampleDelta {
    std::int32_t index = 0;               // which sample (0 .. n-1)
    std::vector<std::int32_t> token_ids;  // new tokens (all of them, stop tokens included)
    // New text: complete UTF-8, stop strings and everything after them cut, a possible partial stop string held
    // back until resolved. Empty when the engine has no TokenTextSource.
    std::string text;
    std::vector<SampledToken> logprobs;         // one per new token when the request asked for logprobs
    std::optional<FinishReason> finish_reason;  // set on this sample's last delta
    // Why it stopped: the stop token id, or the stop string matched (vLLM's stop_reason); empty for EOS, length.
    std::variant<std::monostate, std::int32_t, std::string> stop_reason;
};

struct Usage {
    std::int32_t prompt_tokens = 0;
    std::int32_t completion_tokens = 0;  // summed over the n samples
    std::int32_t cached_tokens = 0;      // prompt tokens served from the prefix cache (prompt_tokens_details)
};

// Per-request timings, in seconds, on the request's last event (the sources of the vLLM histograms).
struct RequestTimings {
    double queue = 0;    // arrival -> first scheduled
    double ttft = 0;     // arrival -> first token
    double prefill = 0;  // first scheduled -> first token
    double decode = 0;   // first token -> last token
    double e2e = 0;      // arrival -> finished
};

struct RequestEvent {
    std::vector<SampleDelta> samples;       // the samples that progressed (or finished) in this step
    bool finished = false;                  // the request's last event: nothing follows
    std::optional<Usage> usage;             // on the last event
    std::optional<RequestTimings> timings;  // on the last event
    std::string error;                      // non-empty on a failed request's last event
};

struct EngineStats {
    std::int32_t num_running = 0;  // sequences in the running batch (vLLM counts each of n as a request too)
    std::int32_t num_waiting = 0;  // sequences queued, preempted ones included
    double kv_cache_usage = 0;     // fraction of KV pages referenced by sequences, 0..1
    std::int32_t num_pages = 0, num_free_pages = 0, num_cached_pages = 0;
    std::int64_t prefix_cache_queries = 0;  // tokens looked up in the prefix cache
    std::int64_t prefix_cache_hits = 0;     // tokens found
    std::int64_t num_preemptions = 0;
    std::int64_t prompt_tokens = 0;           // prompt tokens of requests that produced their first token
    std::int64_t generation_tokens = 0;       // generated tokens
    std::int64_t finished[4] = {0, 0, 0, 0};  // finished requests by FinishReason (stop, length, abort, error)
    std::int64_t num_steps = 0;
    std::int64_t num_rejected = 0;  // submissions refused because the queue was full
    // Speculative decoding (vllm:spec_decode_*): verify steps, drafted tokens, accepted tokens, and accepted
    // tokens by draft position.
    std::int64_t spec_num_drafts = 0, spec_num_draft_tokens = 0, spec_num_accepted_tokens = 0;
    std::vector<std::int64_t> spec_accepted_per_position;
    Histogram ttft, inter_token_latency, e2e_latency, queue_time, prefill_time, decode_time;
};

}  // namespace msa
