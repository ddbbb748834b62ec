#include "server/tool_choice_policy.h"

#include <fmt/format.h>

namespace msa::server {

ToolCallPlan plan_tool_calls(const ChatCompletionRequest& request, std::optional<ToolCallFormat> format,
                             bool generation_starts_in_reasoning) {
    ToolCallPlan plan;
    if (request.tool_choice.mode == ToolChoice::Mode::none) return plan;
    if (!format) {
        throw unsupported_parameter("tool_choice",
                                    "Tool calling needs a tool-call parser: start the server with --tool-call-parser "
                                    "(minimax_m3 or minimax_m2), or send tool_choice 'none'.");
    }
    plan.parse = true;
    if (!request.parallel_tool_calls) plan.max_calls = 1;
    const bool forcing = request.tool_choice.mode == ToolChoice::Mode::required ||
                         request.tool_choice.mode == ToolChoice::Mode::named;
    if (forcing) {
        if (generation_starts_in_reasoning) {
            plan.check_after = true;
        } else {
            plan.forced_prefix = ToolCallParser::forced_prefix(*format, request.tool_choice);
        }
    }
    return plan;
}

std::optional<ApiError> check_tool_choice(const ToolChoice& choice, const std::vector<ToolCallResult>& calls) {
    if (choice.mode == ToolChoice::Mode::required && calls.empty()) {
        return ApiError(500, "server_error", "The model did not call a tool although tool_choice was 'required'.",
                        "tool_choice", "tool_choice_not_satisfied");
    }
    if (choice.mode == ToolChoice::Mode::named) {
        bool ok = !calls.empty();
        for (const auto& c : calls) ok = ok && c.name == choice.name;
        if (!ok) {
            return ApiError(500, "server_error",
                            fmt::format("The model did not call '{}' as tool_choice required.", choice.name),
                            "tool_choice", "tool_choice_not_satisfied");
        }
    }
    return std::nullopt;
}

}  // namespace msa::server
