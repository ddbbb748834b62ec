// Extracts tool calls from generated content (api.md section 6), incrementally: text outside tool calls is
// released as content as soon as it cannot be the start of a tool-call marker, tool calls are reported as OpenAI
// delta.tool_calls fragments while their arguments are still being written (tool_call_assembler.h).
//
// Formats:
//  minimax_m3   ]<]minimax[>[<tool_call>
//               ]<]minimax[>[<invoke name="f">]<]minimax[>[<city>Paris]<]minimax[>[</city>]<]minimax[>[</invoke>
//               ]<]minimax[>[</tool_call>
//    Every structural tag carries the namespace token ]<]minimax[>[; the parameter name is the tag; a parameter
//    whose body starts with a namespaced open tag is nested XML: children named <item> make an array when the
//    schema says array, other children make an object. Several <invoke> inside one <tool_call> are parallel calls.
//    A namespaced <invoke> without the wrapper is accepted too.
//  minimax_m2   <minimax:tool_call>
//               <invoke name="f">
//               <parameter name="city">Paris</parameter>
//               </invoke>
//               </minimax:tool_call>
//    One leading and one trailing line break of a parameter value are trimmed (the template writes them).
//
// Closing tags inside values (the rule): a closing tag ends a parameter value only when it is the closing tag of
// that parameter AND what follows it, after optional whitespace, is the next structural tag (m3: the namespace
// token; m2: `<parameter`, `</invoke>` or `</minimax:tool_call>`) or the end of the output. Anything else, such
// as `</city>` or `</parameter>` followed by more text, is part of the value. A value that really contains a
// closing tag followed by a structural tag cannot be told apart from the end of the value (no format can).
//
// Lenience: text between calls that is not a call is released as content; text between parameters is dropped;
// at the end of generation an unfinished parameter, call or block is closed, so every reported call has valid
// JSON arguments.
#pragma once

#include "server/openai_request.h"
#include "server/tool_call_assembler.h"

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server {

enum class ToolCallFormat { minimax_m3, minimax_m2 };

// Names accepted by --tool-call-parser.
bool is_tool_call_parser_name(std::string_view name);
// Throws msa::Error for an unknown name.
ToolCallFormat tool_call_format(std::string_view name);

class ToolCallParser {
public:
    // `tools` must outlive the parser; ids come from `ids` (default: random call_<24 hex>).
    ToolCallParser(ToolCallFormat format, const std::vector<ToolDefinition>& tools, IdGenerator ids = {},
                   std::size_t max_calls = std::numeric_limits<std::size_t>::max());

    ToolParseDelta feed(std::string_view text);
    // End of generation: closes whatever is open and releases held-back text.
    ToolParseDelta finish();

    const std::vector<ToolCallResult>& calls() const { return assembler_.calls(); }
    // True once a tool-call block (or call) started, whether or not a call was completed.
    bool saw_tool_call() const { return saw_tool_call_; }

    // Text that, appended to the prompt after the generation prompt, forces the model to call a tool
    // (tool_choice required: the opening of a call block; named: up to and including that function's invoke
    // tag). Empty for none/auto. Feed the same text to the parser before the generated text.
    static std::string forced_prefix(ToolCallFormat format, const ToolChoice& choice);

private:
    enum class State { text, block, invoke, param_start, leaf, nested };
    bool step(ToolParseDelta& out);
    bool step_text(ToolParseDelta& out);
    bool step_block(ToolParseDelta& out);
    bool step_invoke(ToolParseDelta& out);
    bool step_param_start();
    bool step_leaf(ToolParseDelta& out);
    bool step_nested(ToolParseDelta& out);
    // Whether the text after a closing tag continues the structure: 1 yes, 0 no, -1 cannot tell yet.
    int continuation(std::string_view after) const;
    void finish_nested(std::size_t raw_end, ToolParseDelta& out);

    ToolCallFormat format_;
    ToolCallAssembler assembler_;
    std::string buf_;
    State state_ = State::text;
    bool finishing_ = false;
    bool saw_tool_call_ = false;
    std::string param_;             // the open parameter's name
    bool trim_leading_newline_ = false;
    std::size_t nested_scan_ = 0;   // nested: how far buf_ has been scanned for tags
    int nested_depth_ = 0;
};

}  // namespace msa::server
