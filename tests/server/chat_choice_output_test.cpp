#include "server/chat_choice_output.h"

#include "chunking.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace msa::server {
namespace {

using nlohmann::json;

const std::string kNs = "]<]minimax[>[";

std::vector<ToolDefinition> tools() {
    ToolDefinition t;
    t.name = "search";
    t.parameters = json::parse(R"({"type":"object","properties":{"q":{"type":"string"},"k":{"type":"integer"}}})");
    return {t};
}

ChatOutputOptions options(const std::vector<ToolDefinition>& defs) {
    ChatOutputOptions o;
    o.reasoning_parser = "minimax_m3";
    o.prompt = "<|assistant|><mm:think>\n";
    o.tool_format = ToolCallFormat::minimax_m3;
    o.tools = &defs;
    o.logprobs = true;
    auto n = std::make_shared<int>(0);
    o.ids = [n] { return "call_" + std::to_string((*n)++); };
    return o;
}

struct Streamed {
    std::string content;
    std::string reasoning;
    std::vector<std::string> args;
    std::size_t logprobs = 0;
};

// Feeds `text` as events of the given pieces (one token per byte) and collects both views.
std::pair<Streamed, ChatChoice> run(const std::vector<std::string>& pieces, const std::vector<ToolDefinition>& defs,
                                    std::string finish = "stop") {
    ChatChoiceOutput out(0, options(defs));
    Streamed s;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        GenerationEvent e;
        e.text = pieces[i];
        for (const char c : pieces[i]) {
            e.token_ids.push_back(static_cast<unsigned char>(c));
            e.logprobs.push_back({std::string(1, c), -1.0, {}});
        }
        e.finished = i + 1 == pieces.size();
        if (e.finished) e.finish_reason = finish;
        const ChatDelta d = out.add(e);
        s.content += d.content;
        s.reasoning += d.reasoning;
        s.logprobs += d.logprobs.size();
        for (const auto& f : d.tool_calls) {
            if (static_cast<std::size_t>(f.index) >= s.args.size()) s.args.resize(f.index + 1);
            s.args[f.index] += f.arguments;
        }
    }
    return {s, out.result()};
}

const std::string kText = "\nFind it.\n</mm:think>\n\nSearching now." + kNs + "<tool_call>\n" + kNs +
                          "<invoke name=\"search\">" + kNs + "<q>msa <b>engine</b>" + kNs + "</q>" + kNs + "<k>5" +
                          kNs + "</k>" + kNs + "</invoke>\n" + kNs + "</tool_call>";

TEST(ChatChoiceOutput, ReasoningThenContentThenToolCall) {
    const auto defs = tools();
    const auto [streamed, choice] = run({kText}, defs);
    EXPECT_EQ(choice.reasoning, "Find it.\n");
    EXPECT_EQ(choice.content, "Searching now.");
    ASSERT_EQ(choice.tool_calls.size(), 1u);
    EXPECT_EQ(choice.tool_calls[0].arguments, R"({"q":"msa <b>engine</b>","k":5})");
    EXPECT_EQ(choice.finish_reason, "tool_calls");
    EXPECT_EQ(choice.logprobs->size(), kText.size());
    EXPECT_EQ(streamed.logprobs, kText.size());
}

TEST(ChatChoiceOutput, LengthKeepsItsFinishReason) {
    const auto defs = tools();
    const auto [streamed, choice] = run({kText.substr(0, kText.size() - 30)}, defs, "length");
    EXPECT_EQ(choice.finish_reason, "length");
    ASSERT_EQ(choice.tool_calls.size(), 1u);
    EXPECT_FALSE(json::parse(choice.tool_calls[0].arguments, nullptr, false).is_discarded());
}

RC_GTEST_PROP(ChatChoiceOutputProperty, StreamEqualsResultInAnyChunking, ()) {
    const auto defs = tools();
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    const auto [whole_stream, whole] = run({kText}, defs);
    const auto [streamed, choice] = run(testing::random_chunks(kText, seed, 0.4), defs);
    RC_ASSERT(streamed.content == choice.content);
    RC_ASSERT(streamed.reasoning == choice.reasoning.value_or(""));
    RC_ASSERT(streamed.args.size() == choice.tool_calls.size());
    for (std::size_t i = 0; i < streamed.args.size(); ++i) RC_ASSERT(streamed.args[i] == choice.tool_calls[i].arguments);
    RC_ASSERT(choice.content == whole.content);
    RC_ASSERT(choice.reasoning == whole.reasoning);
    RC_ASSERT(choice.tool_calls.size() == whole.tool_calls.size());
    RC_ASSERT(choice.tool_calls[0].arguments == whole.tool_calls[0].arguments);
}

}  // namespace
}  // namespace msa::server
