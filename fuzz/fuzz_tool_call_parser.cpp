// Fuzz target: the streaming tool-call and reasoning parsers on arbitrary model output. The first byte picks the
// format; the rest is fed once whole and once in chunks whose sizes come from the input itself. Checked for every
// input: both feeds give the same content and calls, every call's streamed fragments concatenate to its final
// arguments, and the arguments are valid JSON. Same for the reasoning parser: chunking never changes the split.
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace msa::server;

const std::vector<ToolDefinition>& tools() {
    static const std::vector<ToolDefinition> defs = [] {
        ToolDefinition t;
        t.name = "get_weather";
        t.parameters = nlohmann::json::parse(R"({"type":"object","properties":{"city":{"type":"string"},
            "days":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},
            "opts":{"type":"object","properties":{"n":{"type":"number"}}},"flag":{"type":"boolean"}}})");
        return std::vector<ToolDefinition>{t};
    }();
    return defs;
}

struct Outcome {
    std::string content;
    std::vector<ToolCallResult> calls;
    std::vector<std::string> streamed;
};

Outcome run(ToolCallFormat format, const std::string& text, const std::vector<std::size_t>& sizes) {
    int next_id = 0;
    ToolCallParser parser(format, tools(), [&] { return "call_" + std::to_string(next_id++); });
    Outcome out;
    const auto take = [&](ToolParseDelta d) {
        out.content += d.content;
        for (const auto& f : d.tool_calls) {
            if (f.index < 0) std::abort();
            if (static_cast<std::size_t>(f.index) >= out.streamed.size()) out.streamed.resize(f.index + 1);
            out.streamed[f.index] += f.arguments;
        }
    };
    std::size_t pos = 0;
    for (std::size_t i = 0; pos < text.size(); ++i) {
        const std::size_t n = sizes.empty() ? text.size() : std::max<std::size_t>(1, sizes[i % sizes.size()]);
        take(parser.feed(text.substr(pos, n)));
        pos += n;
    }
    take(parser.finish());
    out.calls = parser.calls();
    return out;
}

void check_reasoning(const std::string& text, const std::vector<std::size_t>& sizes) {
    for (const bool inside : {false, true}) {
        ReasoningParser whole(reasoning_markers("minimax_m3"), inside);
        ReasoningParser chunked(reasoning_markers("minimax_m3"), inside);
        auto a = whole.feed(text);
        const auto a_end = whole.finish();
        a.reasoning += a_end.reasoning;
        a.content += a_end.content;
        ReasoningDelta b;
        std::size_t pos = 0;
        for (std::size_t i = 0; pos < text.size(); ++i) {
            const std::size_t n = std::max<std::size_t>(1, sizes.empty() ? text.size() : sizes[i % sizes.size()]);
            const auto d = chunked.feed(text.substr(pos, n));
            b.reasoning += d.reasoning;
            b.content += d.content;
            pos += n;
        }
        const auto b_end = chunked.finish();
        b.reasoning += b_end.reasoning;
        b.content += b_end.content;
        if (a.reasoning != b.reasoning || a.content != b.content) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const auto format = (data[0] & 1) != 0 ? ToolCallFormat::minimax_m2 : ToolCallFormat::minimax_m3;
    std::vector<std::size_t> sizes;
    for (int i = 0; i < 4; ++i) sizes.push_back(1 + ((data[0] >> (1 + i)) & 1) * (1 + data[1] % 13));
    const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);

    const Outcome whole = run(format, text, {});
    const Outcome chunked = run(format, text, sizes);
    if (whole.content != chunked.content || whole.calls.size() != chunked.calls.size()) std::abort();
    for (std::size_t i = 0; i < whole.calls.size(); ++i) {
        if (whole.calls[i].name != chunked.calls[i].name || whole.calls[i].arguments != chunked.calls[i].arguments) {
            std::abort();
        }
        if (whole.streamed.at(i) != whole.calls[i].arguments || chunked.streamed.at(i) != chunked.calls[i].arguments) {
            std::abort();
        }
        if (nlohmann::json::parse(whole.calls[i].arguments, nullptr, false).is_discarded()) std::abort();
    }
    check_reasoning(text, sizes);
    return 0;
}
