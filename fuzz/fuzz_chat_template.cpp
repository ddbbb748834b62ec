// Fuzz target for the chat-template engine (src/chat): the input is a template source. It is parsed, the
// ChatTemplate layer inspects it (content-format detection, the tool-argument probe render), and it is rendered
// with a fixed chat context (messages with tool calls and reasoning, tools, special tokens, thinking_mode) under
// tight limits. Any outcome is fine except a crash, a hang, a sanitizer report or an exception that is not an
// msa::Error.
#include "chat/chat_template.h"
#include "chat/jinja_template.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

const msa::jinja::Dict& fixed_context() {
    static const msa::jinja::Value context = msa::jinja::from_json(nlohmann::ordered_json::parse(R"({
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Weather in Paris? <think>x</think> \u00e9\u4e16\ud83d\ude00"},
            {"role": "assistant", "content": "", "reasoning_content": "Use the tool.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, null, 2.5]}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "documents": null,
        "add_generation_prompt": true,
        "bos_token": "]~!b[",
        "eos_token": "[e~[",
        "thinking_mode": "enabled",
        "enable_thinking": false
    })"));
    return context.as_dict();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > (64u << 10)) {
        return 0;
    }
    const std::string source(reinterpret_cast<const char*>(data), size);
    msa::jinja::RenderOptions options;
    options.max_steps = 200'000;
    options.max_output_bytes = 1u << 20;
    options.max_call_depth = 64;
    options.now_unix_seconds = 1741964966;
    try {
        const msa::jinja::Template tmpl(source, "fuzz");
        tmpl.render(fixed_context(), options);
    } catch (const msa::Error&) {
        // template errors are expected
    }
    try {
        const msa::ChatTemplate chat(source, {{"bos_token", "<s>"}}, "fuzz");
        (void)chat.content_format();
        (void)chat.renders_object_arguments();
    } catch (const msa::Error&) {
        // template errors are expected
    }
    return 0;
}
