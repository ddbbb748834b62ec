// Builds OpenAI tool calls from the structural events of a tool-call parser, and streams their arguments as JSON
// text fragments while the model is still writing them.
//
// Arguments are written as compact JSON, {"name":value,...}, one fragment at a time:
//  - `{"city":` goes out when the parameter opens;
//  - a parameter whose schema type is exactly "string" streams as a JSON string, character by character as the
//    text arrives (held back only while it could still be the literal `null`, or inside an unfinished UTF-8
//    sequence); the text `null` alone becomes JSON null;
//  - any other parameter is converted once complete (tool_argument_converter.h) and goes out whole;
//  - `}` goes out when the call closes.
// The final `arguments` of a call is by construction the concatenation of its fragments, so the streamed pieces
// always concatenate to valid JSON equal to the non-streamed result.
#pragma once

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_ids.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server {

// What a tool-call parser releases for one piece of input: ordinary content, then tool-call fragments.
struct ToolParseDelta {
    std::string content;
    std::vector<ToolCallFragment> tool_calls;
    bool empty() const { return content.empty() && tool_calls.empty(); }
    void append(ToolParseDelta&& other);
};

class ToolCallAssembler {
public:
    // `tools` must outlive the assembler. At most `max_calls` calls are reported (parallel_tool_calls=false
    // means 1); later ones are parsed and dropped.
    ToolCallAssembler(const std::vector<ToolDefinition>& tools, IdGenerator ids, std::size_t max_calls);

    void begin_call(std::string name, ToolParseDelta& out);
    void end_call(ToolParseDelta& out);
    bool in_call() const { return in_call_; }

    // A top-level parameter. Its value arrives either as leaf text (value_text... then end_leaf) or, for nested
    // structures, as a finished JSON value (end_value).
    void begin_param(std::string_view name, ToolParseDelta& out);
    void value_text(std::string_view text, ToolParseDelta& out);
    void end_leaf(ToolParseDelta& out);
    void end_value(const nlohmann::json& value, ToolParseDelta& out);
    bool in_param() const { return in_param_; }
    // The schema of the current parameter (nullptr: the tool or the parameter is unknown).
    const nlohmann::json* param_schema() const { return param_schema_; }

    const std::vector<ToolCallResult>& calls() const { return calls_; }

private:
    void emit(std::string_view json_text, ToolParseDelta& out);
    void flush_string(bool final, ToolParseDelta& out);

    const std::vector<ToolDefinition>& tools_;
    IdGenerator ids_;
    std::size_t max_calls_;
    std::vector<ToolCallResult> calls_;
    std::size_t seen_calls_ = 0;
    bool in_call_ = false;
    bool reporting_ = false;        // this call is within max_calls
    bool first_fragment_ = false;   // the next fragment is the call's first (carries id and name)
    const nlohmann::json* tool_schema_ = nullptr;
    std::size_t params_in_call_ = 0;

    bool in_param_ = false;
    const nlohmann::json* param_schema_ = nullptr;
    bool streams_as_string_ = false;
    bool string_opened_ = false;    // the opening quote went out
    std::string value_;             // leaf text not yet written
};

// Appends the JSON escape of `text` (no quotes) to `out`; invalid UTF-8 becomes U+FFFD.
void append_json_escaped(std::string_view text, std::string& out);
// Length of a trailing, possibly incomplete UTF-8 sequence that must wait for more bytes (0 if none).
std::size_t incomplete_utf8_suffix(std::string_view text);

}  // namespace msa::server
