// Parsing shared by the chat-completion and completion request parsers (internal to the server module).
#pragma once

#include "server/json_fields.h"
#include "server/openai_request.h"

namespace msa::server {

enum class Endpoint { chat, completion };

// Sampling, stopping and logprob fields common to both endpoints. For chat, `logprobs` is a boolean with
// `top_logprobs` as the count; for completions, `logprobs` is the count itself.
SamplingOptions parse_sampling_options(const JsonFields& fields, const RequestLimits& limits, Endpoint endpoint);
// stream_options is only allowed together with stream=true (as in OpenAI).
StreamOptions parse_stream_options(const JsonFields& fields, bool stream);
// Rejects fields that OpenAI or vLLM define and that we do not implement, when they ask for anything other than
// the default behaviour.
void reject_unimplemented_fields(const JsonFields& fields, Endpoint endpoint);
// n in [1, limits.max_n].
std::int64_t parse_n(const JsonFields& fields, const RequestLimits& limits);

}  // namespace msa::server
