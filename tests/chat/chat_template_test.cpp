// The ChatTemplate layer: loading from a model directory (all the places transformers looks), special tokens,
// named templates, the request normalisation, chat_template_kwargs, continue_final_message, errors; and the
// MiniMax-M3/M2-style templates against the wire formats of the API spec (api.md sections 5 and 6).
#include "chat/chat_template.h"
#include "chat/jinja_error.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

namespace msa {
namespace {

using ojson = nlohmann::ordered_json;

class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("msa_chat_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path_ / name, std::ios::binary) << text;
    }

private:
    std::filesystem::path path_;
};

ChatRequest user_says(const std::string& text) {
    ChatRequest r;
    r.messages = ojson::array({{{"role", "user"}, {"content", text}}});
    return r;
}

const char* kSimple = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                      "{% if add_generation_prompt %}<assistant>{% endif %}";

TEST(ChatTemplateLoad, FromTokenizerConfigWithAddedTokenObjects) {
    TempDir dir;
    ojson config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}}},
                    {"eos_token", "</s>"},
                    {"pad_token", nullptr},
                    {"chat_template", kSimple}};
    dir.write("tokenizer_config.json", config.dump());
    const auto t = ChatTemplate::from_model_dir(dir.path());
    EXPECT_EQ(t.special_token("bos_token"), "<s>");
    EXPECT_EQ(t.special_token("eos_token"), "</s>");
    EXPECT_EQ(t.special_token("pad_token"), "");
    EXPECT_EQ(t.render(user_says("hi")), "<s><user>hi<assistant>");
}

TEST(ChatTemplateLoad, ChatTemplateJinjaFileWinsAndKeepsConfigTokens) {
    TempDir dir;
    dir.write("tokenizer_config.json", ojson({{"bos_token", "<B>"}, {"chat_template", "old"}}).dump());
    dir.write("chat_template.jinja", "{{ bos_token }}new:{{ messages[0].content }}\n");
    EXPECT_EQ(ChatTemplate::from_model_dir(dir.path()).render(user_says("x")), "<B>new:x");
}

TEST(ChatTemplateLoad, ChatTemplateJsonFile) {
    TempDir dir;
    dir.write("chat_template.json", ojson({{"chat_template", "json:{{ messages|length }}"}}).dump());
    EXPECT_EQ(ChatTemplate::from_model_dir(dir.path()).render(user_says("x")), "json:1");
}

TEST(ChatTemplateLoad, NamedTemplatesSelectToolUseWhenToolsAreGiven) {
    const ojson config = {{"chat_template", ojson::array({{{"name", "default"}, {"template", "plain"}},
                                                          {{"name", "tool_use"}, {"template", "tools:{{ tools|length }}"}},
                                                          {{"name", "rag"}, {"template", "rag"}}})}};
    const auto t = ChatTemplate::from_tokenizer_config(config, "config");
    EXPECT_EQ(t.template_names(), (std::vector<std::string>{"default", "rag", "tool_use"}));
    ChatRequest r = user_says("x");
    EXPECT_EQ(t.render(r), "plain");
    r.tools = ojson::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
    EXPECT_EQ(t.render(r), "tools:1");
    r.template_name = "rag";
    EXPECT_EQ(t.render(r), "rag");
    r.template_name = "nope";
    EXPECT_THROW(t.render(r), Error);
}

TEST(ChatTemplateLoad, MissingOrBrokenTemplatesAreClearErrors) {
    TempDir empty;
    try {
        ChatTemplate::from_model_dir(empty.path());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("has no chat template"), std::string::npos) << e.what();
    }
    TempDir bad_json;
    bad_json.write("tokenizer_config.json", "{not json");
    EXPECT_THROW(ChatTemplate::from_model_dir(bad_json.path()), Error);
    TempDir bad_template;
    bad_template.write("chat_template.jinja", "{% for %}");
    try {
        ChatTemplate::from_model_dir(bad_template.path());
        FAIL() << "no error";
    } catch (const jinja::TemplateError& e) {
        EXPECT_NE(std::string(e.what()).find("chat_template.jinja"), std::string::npos) << e.what();
        EXPECT_EQ(e.line(), 1);
    }
    EXPECT_THROW(ChatTemplate::from_tokenizer_config(ojson({{"chat_template", 5}}), "c"), Error);
}

TEST(ChatTemplateRender, VariablesMatchTransformers) {
    const ChatTemplate t("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} "
                         "{{ bos_token is defined }} {{ eos_token }} {{ extra }}",
                         {{"eos_token", "</s>"}}, "t");
    ChatRequest r = user_says("x");
    r.add_generation_prompt = false;
    r.template_kwargs = {{"extra", ojson::array({1, "two"})}};
    EXPECT_EQ(t.render(r), "True True False False </s> [1, 'two']");
    r.template_kwargs = {{"eos_token", "override"}};  // kwargs override special tokens, as in transformers
    EXPECT_EQ(t.render(r), "True True False False override ");
    r.template_kwargs = {{"messages", ojson::array()}};
    EXPECT_THROW(t.render(r), Error);
}

TEST(ChatTemplateRender, ReasoningFieldIsExposedAsReasoningContent) {
    const ChatTemplate t("{% for m in messages %}[{{ m.reasoning_content }}]{% endfor %}", {}, "t");
    ChatRequest r;
    r.messages = ojson::parse(R"([{"role": "assistant", "content": "a", "reasoning": "r1"},
                                  {"role": "assistant", "content": "b", "reasoning": "x", "reasoning_content": "r2"}])");
    EXPECT_EQ(t.render(r), "[r1][r2]");
}

TEST(ChatTemplateRender, ToolArgumentsAreParsedOnlyForTemplatesThatRenderObjects) {
    const auto messages = ojson::parse(R"([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\":1,\"a\":[true]}"}}]}])");
    const ChatTemplate object_template(
        "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments|tojson }}{% endfor %}{% endfor %}",
        {}, "object");
    const ChatTemplate string_template(
        "{% for m in messages %}{% for c in m.tool_calls %}{{ '>' + c.function.arguments }}{% endfor %}{% endfor %}", {},
        "string");
    EXPECT_TRUE(object_template.renders_object_arguments());
    EXPECT_FALSE(string_template.renders_object_arguments());
    ChatRequest r;
    r.messages = messages;
    EXPECT_EQ(object_template.render(r), R"({"b": 1, "a": [true]})");  // parsed, key order kept
    EXPECT_EQ(string_template.render(r), R"(>{"b":1,"a":[true]})");    // left as the client sent it
    r.messages[0]["tool_calls"][0]["function"]["arguments"] = "not json";
    EXPECT_EQ(object_template.render(r), R"("not json")");
}

TEST(ChatTemplateRender, ContentPartsAreJoinedForStringTemplatesOnly) {
    const auto messages = ojson::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                        {"type": "text", "text": "b"}]}])");
    const ChatTemplate string_template("{{ messages[0].content }}", {}, "s");
    const ChatTemplate parts_template("{% for p in messages[0].content %}<{{ p.text }}>{% endfor %}", {}, "p");
    const ChatTemplate aliased_parts_template(
        "{% for m in messages %}{% set c = m['content'] %}{% for p in c %}({{ p.text }}){% endfor %}{% endfor %}", {},
        "a");
    EXPECT_EQ(string_template.content_format(), ChatTemplate::ContentFormat::kString);
    EXPECT_EQ(parts_template.content_format(), ChatTemplate::ContentFormat::kParts);
    EXPECT_EQ(aliased_parts_template.content_format(), ChatTemplate::ContentFormat::kParts);
    ChatRequest r;
    r.messages = messages;
    EXPECT_EQ(string_template.render(r), "a\nb");
    EXPECT_EQ(parts_template.render(r), "<a><b>");
    EXPECT_EQ(aliased_parts_template.render(r), "(a)(b)");
    r.messages[0]["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", "x"}}}});
    EXPECT_THROW(string_template.render(r), Error);
}

TEST(ChatTemplateRender, ContinueFinalMessageEndsInsideTheLastMessage) {
    const ChatTemplate t("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}", {},
                         "t");
    ChatRequest r;
    r.messages = ojson::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is  "}])");
    r.add_generation_prompt = false;
    r.continue_final_message = true;
    EXPECT_EQ(t.render(r), "<user>Hi</user><assistant>The answer is");
    r.add_generation_prompt = true;
    EXPECT_THROW(t.render(r), Error);
}

TEST(ChatTemplateRender, InvalidRequestsAreClearErrors) {
    const ChatTemplate t(kSimple, {}, "t");
    ChatRequest r;
    r.messages = ojson::parse(R"([{"content": "no role"}])");
    try {
        t.render(r);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("messages[0].role"), std::string::npos) << e.what();
    }
    r.messages = ojson::object();
    EXPECT_THROW(t.render(r), Error);
}

TEST(ChatTemplateRender, RaiseExceptionMessagesReachTheCaller) {
    const ChatTemplate t("{% if messages[0].role != 'user' %}{{ raise_exception('first message must be user') }}"
                         "{% endif %}",
                         {}, "t");
    ChatRequest r;
    r.messages = ojson::parse(R"([{"role": "system", "content": "s"}])");
    try {
        t.render(r);
        FAIL() << "no error";
    } catch (const jinja::TemplateError& e) {
        EXPECT_TRUE(e.raised_by_template());
        EXPECT_NE(std::string(e.what()).find("first message must be user"), std::string::npos);
    }
}

// ---- MiniMax-style templates against the API spec ----------------------------------------------------------------

ChatTemplate minimax(const std::string& name) {
    return ChatTemplate(test::read_text(test::source_dir() / "tools" / "chat" / "templates" / (name + ".jinja")),
                        {{"bos_token", "]~!b["}, {"eos_token", "[e~["}}, name);
}

ChatRequest weather_call() {
    ChatRequest r;
    r.messages = ojson::parse(R"([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
    r.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
    return r;
}

TEST(MiniMaxM3Template, ToolCallsUseTheNamespacedFormatOfTheApiSpec) {
    const std::string prompt = minimax("minimax_m3").render(weather_call());
    // api.md section 6, verbatim.
    const std::string call =
        "]<]minimax[>[<tool_call>\n"
        "]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<city>Paris]<]minimax[>[</city>]<]minimax[>[<days>3"
        "]<]minimax[>[</days>]<]minimax[>[</invoke>\n"
        "]<]minimax[>[</tool_call>";
    EXPECT_NE(prompt.find(call), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("<response name=\"get_weather\">sunny"), std::string::npos) << prompt;
    EXPECT_EQ(prompt.rfind("]~!b[", 0), 0u);
}

TEST(MiniMaxM3Template, LongAgentConversationsStayWithinTheRenderLimits) {
    // 3,000 tool rounds (about 1.7 MB of prompt): the default step budget, which charges copied bytes, must not stop
    // a long but ordinary conversation.
    ChatRequest r = weather_call();
    const ojson round = r.messages;
    for (int i = 0; i < 2999; ++i) {
        for (const auto& m : round) {
            ojson copy = m;
            if (copy.value("role", std::string()) == std::string("tool")) {
                copy["content"] = std::string(400, 'x') + " result " + std::to_string(i);
            }
            r.messages.push_back(copy);
        }
    }
    const std::string prompt = minimax("minimax_m3").render(r);
    EXPECT_GT(prompt.size(), 1'200'000u);
    EXPECT_NE(prompt.find(" result 2998"), std::string::npos);
}

TEST(MiniMaxM3Template, ThinkingModes) {
    const auto t = minimax("minimax_m3");
    auto prompt_for = [&](const char* mode) {
        ChatRequest r = user_says("hi");
        if (mode != nullptr) {
            r.template_kwargs["thinking_mode"] = mode;
        }
        return t.render(r);
    };
    auto ends_with = [](const std::string& s, const std::string& suffix) {
        return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // enabled (and the default) pre-fill <mm:think>: generation starts inside the reasoning.
    EXPECT_TRUE(ends_with(prompt_for("enabled"), "]~b]ai\n<mm:think>\n"));
    EXPECT_EQ(prompt_for(nullptr), prompt_for("enabled"));
    EXPECT_TRUE(ends_with(prompt_for("disabled"), "]~b]ai\n<mm:think>\n</mm:think>\n\n"));
    const std::string adaptive = prompt_for("adaptive");
    EXPECT_TRUE(ends_with(adaptive, "]~b]ai\n"));
    EXPECT_NE(adaptive.find("<mm:think></mm:think>"), std::string::npos);  // the instructional markers
    EXPECT_THROW(prompt_for("sometimes"), jinja::TemplateError);
}

TEST(MiniMaxM2Template, ToolCallsUseTheM2FormatOfTheApiSpec) {
    const std::string prompt = minimax("minimax_m2").render(weather_call());
    const std::string call =
        "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
        "<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>";
    EXPECT_NE(prompt.find(call), std::string::npos) << prompt;
    const std::string generation = "]~b]ai\n<think>\n";
    EXPECT_EQ(prompt.substr(prompt.size() - generation.size()), generation);  // api.md 5: the template pre-fills <think>
}

}  // namespace
}  // namespace msa
