// tool_choice semantics (none / auto / required / named) at the parser and response level.
//  - none: no tool-call parsing; the model's text is content.
//  - auto: calls are parsed when the model makes them; finish_reason becomes "tool_calls".
//  - required / named: when generation does not start inside reasoning, the prompt is extended with the start
//    of a call (ToolCallParser::forced_prefix), so the model can only continue a call (of that function, when
//    named). When it starts inside reasoning the prefix would skip the reasoning, so nothing is forced and the
//    finished response is checked instead: no call (or a call of another function) is an error, never a silent
//    success.
//  - parallel_tool_calls=false: at most one call is reported.
// Tools with tool_choice other than none but no tool-call parser configured is a 400: the raw call text would
// otherwise land in `content` with a 200 (a known trap of other servers).
#pragma once

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/tool_call_parser.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace msa::server {

struct ToolCallPlan {
    bool parse = false;
    std::string forced_prefix;
    std::size_t max_calls = static_cast<std::size_t>(-1);
    bool check_after = false;  // required/named could not be forced: check the result
};

ToolCallPlan plan_tool_calls(const ChatCompletionRequest& request, std::optional<ToolCallFormat> format,
                             bool generation_starts_in_reasoning);

// The error for a finished choice that does not satisfy tool_choice, if any.
std::optional<ApiError> check_tool_choice(const ToolChoice& choice, const std::vector<ToolCallResult>& calls);

}  // namespace msa::server
