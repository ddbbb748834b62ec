// Byte-exact parity with Python's jinja2: every (template, conversation) golden rendered by
// tools/chat/gen_template_goldens.py (HF's environment, real Qwen3 / Llama-3 / DeepSeek-V3 templates from the npm
// test packages, and our MiniMax-M3/M2-style templates) must come out of ChatTemplate identically, and where
// jinja2 raised, ChatTemplate must raise too.
#include "chat/chat_template.h"
#include "chat/jinja_error.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace msa {
namespace {

std::filesystem::path goldens_dir() {
    return test::chat_data_dir() / "chat_goldens";
}

std::filesystem::path npm_dir() {
    return test::source_dir() / "tests" / "npm" / "node_modules";
}

ChatRequest request_for(const nlohmann::ordered_json& conv, std::int64_t now) {
    ChatRequest r;
    r.messages = conv.at("messages");
    r.tools = conv.value("tools", nlohmann::ordered_json());
    r.add_generation_prompt = conv.value("add_generation_prompt", true);
    r.continue_final_message = conv.value("continue_final_message", false);
    r.template_kwargs = conv.value("kwargs", nlohmann::ordered_json::object());
    r.now_unix_seconds = now;
    return r;
}

class ChatTemplateParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateParity, MatchesJinja2ForEveryConversation) {
    test::use_utc();
    const auto golden = test::read_json(goldens_dir() / (GetParam() + ".json"));
    const std::string origin = golden.at("origin").get<std::string>();
    std::optional<ChatTemplate> tmpl;
    if (origin.rfind("npm:", 0) == 0) {
        const auto path = npm_dir() / origin.substr(4);
        if (!std::filesystem::exists(path)) {
            GTEST_SKIP() << "npm test packages are not installed (" << path.string()
                         << " is missing): run scripts/setup.sh --test";
        }
        tmpl = ChatTemplate::from_tokenizer_config(test::read_json(path), path.string());
    } else {
        ASSERT_EQ(origin.rfind("file:", 0), 0u) << origin;
        std::map<std::string, std::string> tokens;
        for (const auto& [k, v] : golden.at("special_tokens").items()) {
            tokens[k] = v.get<std::string>();
        }
        tmpl.emplace(test::read_text(test::source_dir() / origin.substr(5)), tokens, origin);
    }
    // ChatTemplate's own detection agrees with the facts the golden script was told.
    EXPECT_EQ(tmpl->content_format() == ChatTemplate::ContentFormat::kParts,
              golden.at("content_format").get<std::string>() == "parts");
    EXPECT_EQ(tmpl->renders_object_arguments(), golden.at("object_arguments").get<bool>());

    const auto conversations = test::read_json(test::chat_data_dir() / "chat_conversations.json");
    const auto& renders = golden.at("renders");
    ASSERT_EQ(renders.size(), conversations.size()) << "goldens are stale: rerun tools/chat/gen_template_goldens.py";
    std::size_t identical = 0;
    std::size_t errors = 0;
    for (const auto& conv : conversations) {
        const std::string name = conv.at("name").get<std::string>();
        SCOPED_TRACE(GetParam() + " / " + name);
        ASSERT_TRUE(renders.contains(name)) << "goldens are stale: rerun tools/chat/gen_template_goldens.py";
        const auto& expected = renders.at(name);
        const ChatRequest request = request_for(conv, golden.at("now_unix_seconds").get<std::int64_t>());
        if (expected.contains("error")) {
            try {
                const std::string text = tmpl->render(request);
                ADD_FAILURE() << "jinja2 raised \"" << expected["error"].get<std::string>() << "\" but we rendered:\n"
                              << text;
            } catch (const jinja::TemplateError& e) {
                if (expected.value("error_type", "") == "TemplateError") {  // the template's raise_exception()
                    EXPECT_TRUE(e.raised_by_template()) << e.what();
                    EXPECT_NE(std::string(e.what()).find(expected["error"].get<std::string>()), std::string::npos)
                        << e.what();
                }
                ++errors;
            } catch (const Error& e) {
                EXPECT_NE(expected.value("error_type", ""), "TemplateError") << e.what();
                ++errors;
            }
            continue;
        }
        try {
            const std::string text = tmpl->render(request);
            EXPECT_EQ(text, expected.at("text").get<std::string>());
            identical += text == expected.at("text").get<std::string>();
        } catch (const Error& e) {
            ADD_FAILURE() << "render failed: " << e.what();
        }
    }
    std::printf("[parity] %s: %zu/%zu identical renders, %zu expected errors reproduced\n", GetParam().c_str(),
                identical, conversations.size() - errors, errors);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateParity,
                         ::testing::Values("qwen3", "llama3", "deepseek_v3", "minimax_m3", "minimax_m2"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace msa
