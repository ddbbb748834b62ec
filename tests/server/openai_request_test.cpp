#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace msa::server {
namespace {

using nlohmann::json;

const RequestLimits kLimits;

// Runs the parser and returns the ApiError it throws (fails the test if it does not throw).
template <typename Fn>
ApiError expect_error(Fn&& fn) {
    try {
        fn();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "expected an ApiError";
    return internal_error("none");
}

ApiError chat_error(const json& body) {
    return expect_error([&] { parse_chat_completion_request(body, kLimits); });
}

json chat_body(json extra = json::object()) {
    json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return body;
}

TEST(ChatRequest, ParsesEveryDocumentedField) {
    const json body = {
        {"model", "msa"},
        {"messages",
         {{{"role", "system"}, {"content", "be brief"}},
          {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
          {{"role", "assistant"},
           {"content", nullptr},
           {"reasoning_content", "thinking"},
           {"tool_calls",
            {{{"id", "call_1"},
              {"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
          {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}}},
        {"max_tokens", 10},
        {"max_completion_tokens", 20},
        {"temperature", 0.5},
        {"top_p", 0.9},
        {"top_k", 40},
        {"min_p", 0.05},
        {"seed", -1},
        {"stop", {"END", "STOP"}},
        {"stop_token_ids", {7, 8}},
        {"n", 2},
        {"logprobs", true},
        {"top_logprobs", 5},
        {"presence_penalty", 0.5},
        {"frequency_penalty", -0.5},
        {"repetition_penalty", 1.1},
        {"logit_bias", {{"42", -100}, {"7", 3.5}}},
        {"ignore_eos", true},
        {"min_tokens", 3},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}},
        {"tools",
         {{{"type", "function"},
           {"function",
            {{"name", "get_weather"},
             {"description", "weather"},
             {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}}},
        {"tool_choice", "required"},
        {"parallel_tool_calls", false},
        {"response_format", {{"type", "text"}}},
        {"reasoning_effort", "high"},
        {"chat_template_kwargs", {{"thinking_mode", "adaptive"}}},
        {"some_unknown_field", {{"anything", 1}}},
        {"user", "u-1"},
    };
    const auto r = parse_chat_completion_request(body, kLimits);
    EXPECT_EQ(r.model, "msa");
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[0].role, ChatMessage::Role::system);
    EXPECT_EQ(r.messages[1].content, "a\nb");
    EXPECT_FALSE(r.messages[2].content.has_value());
    EXPECT_EQ(r.messages[2].reasoning, "thinking");
    ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[2].tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.messages[2].tool_calls[0].arguments_json, json({{"city", "Paris"}}));
    EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
    EXPECT_EQ(r.sampling.max_tokens, 20);  // max_completion_tokens wins
    EXPECT_DOUBLE_EQ(*r.sampling.temperature, 0.5);
    EXPECT_DOUBLE_EQ(*r.sampling.top_p, 0.9);
    EXPECT_EQ(r.sampling.top_k, 40);
    EXPECT_DOUBLE_EQ(*r.sampling.min_p, 0.05);
    EXPECT_EQ(r.sampling.seed, std::uint64_t(-1));
    EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"END", "STOP"}));
    EXPECT_EQ(r.sampling.stop_token_ids, (std::vector<std::int64_t>{7, 8}));
    EXPECT_EQ(r.n, 2);
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(r.sampling.logprobs, 5);
    EXPECT_DOUBLE_EQ(*r.sampling.presence_penalty, 0.5);
    EXPECT_DOUBLE_EQ(*r.sampling.frequency_penalty, -0.5);
    EXPECT_DOUBLE_EQ(*r.sampling.repetition_penalty, 1.1);
    ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
    EXPECT_TRUE(r.sampling.ignore_eos);
    EXPECT_EQ(r.sampling.min_tokens, 3);
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.stream_options.include_usage);
    ASSERT_EQ(r.tools.size(), 1u);
    EXPECT_EQ(r.tools[0].parameters["properties"]["city"]["type"], "string");
    EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::required);
    EXPECT_FALSE(r.parallel_tool_calls);
    EXPECT_EQ(r.response_format.type, ResponseFormat::Type::text);
    EXPECT_EQ(r.reasoning_effort, "high");
    EXPECT_EQ(r.chat_template_kwargs["thinking_mode"], "adaptive");
}

TEST(ChatRequest, DefaultsAndNulls) {
    const auto r = parse_chat_completion_request(
        chat_body({{"temperature", nullptr}, {"stop", "x"}, {"tool_choice", nullptr}}), kLimits);
    EXPECT_FALSE(r.sampling.temperature.has_value());
    EXPECT_FALSE(r.sampling.max_tokens.has_value());
    EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"x"});
    EXPECT_EQ(r.n, 1);
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::none);
    EXPECT_TRUE(r.add_generation_prompt);
    EXPECT_FALSE(r.sampling.logprobs.has_value());
}

TEST(ChatRequest, ToolChoiceDefaultsToAutoWithTools) {
    const json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
    const auto r = parse_chat_completion_request(chat_body({{"tools", tools}}), kLimits);
    EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::auto_);
    const auto named = parse_chat_completion_request(
        chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}}), kLimits);
    EXPECT_EQ(named.tool_choice.mode, ToolChoice::Mode::named);
    EXPECT_EQ(named.tool_choice.name, "f");
}

struct BadCase {
    json extra;
    std::string param;
};

TEST(ChatRequest, WrongTypesAndRangesNameTheField) {
    const json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
    const std::vector<BadCase> cases = {
        {{{"temperature", "hot"}}, "temperature"},
        {{{"temperature", 2.5}}, "temperature"},
        {{{"temperature", -0.1}}, "temperature"},
        {{{"top_p", 0}}, "top_p"},
        {{{"top_p", 1.5}}, "top_p"},
        {{{"top_k", -2}}, "top_k"},
        {{{"top_k", 1.5}}, "top_k"},
        {{{"min_p", 2}}, "min_p"},
        {{{"max_tokens", 0}}, "max_tokens"},
        {{{"max_tokens", "10"}}, "max_tokens"},
        {{{"max_completion_tokens", -1}}, "max_completion_tokens"},
        {{{"n", 0}}, "n"},
        {{{"n", 1000}}, "n"},
        {{{"presence_penalty", 3}}, "presence_penalty"},
        {{{"frequency_penalty", -2.5}}, "frequency_penalty"},
        {{{"repetition_penalty", 0}}, "repetition_penalty"},
        {{{"seed", "x"}}, "seed"},
        {{{"stop", 5}}, "stop"},
        {{{"stop", {"a", 3}}}, "stop[1]"},
        {{{"stop", {""}}}, "stop"},
        {{{"stop_token_ids", {1, -1}}}, "stop_token_ids[1]"},
        {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
        {{{"logit_bias", {{"5", 101}}}}, "logit_bias.5"},
        {{{"logprobs", 1}}, "logprobs"},
        {{{"top_logprobs", 3}}, "top_logprobs"},
        {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
        {{{"stream", "yes"}}, "stream"},
        {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
        {{{"stream", true}, {"stream_options", {{"include_usage", 1}}}}, "stream_options.include_usage"},
        {{{"min_tokens", 5}, {"max_tokens", 2}}, "min_tokens"},
        {{{"messages", json::array()}}, "messages"},
        {{{"messages", "hi"}}, "messages"},
        {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role"},
        {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
        {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
        {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, "messages[0].content[0].type"},
        {{{"messages", {{{"role", "user"}, {"content", "x"}}, 5}}}, "messages[1]"},
        {{{"tools", {{{"type", "function"}, {"function", {{"name", "bad name"}}}}}}}, "tools[0].function.name"},
        {{{"tools", {{{"type", "code_interpreter"}}}}}, "tools[0].type"},
        {{{"tools", tools}, {"tool_choice", "sometimes"}}, "tool_choice"},
        {{{"tool_choice", "required"}}, "tool_choice"},
        {{{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}},
         "tool_choice.function.name"},
        {{{"response_format", {{"type", "json_object"}}}}, "response_format"},
        {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
        {{{"reasoning_effort", "extreme"}}, "reasoning_effort"},
        {{{"chat_template_kwargs", {{"thinking_mode", "on"}}}}, "chat_template_kwargs.thinking_mode"},
        {{{"chat_template_kwargs", "x"}}, "chat_template_kwargs"},
        {{{"functions", {{{"name", "f"}}}}}, "functions"},
        {{{"guided_json", {{"type", "object"}}}}, "guided_json"},
        {{{"use_beam_search", true}}, "use_beam_search"},
        {{{"echo", true}}, "echo"},
        {{{"chat_template", "{{x}}"}}, "chat_template"},
        {{{"continue_final_message", true}}, "continue_final_message"},
    };
    for (const auto& c : cases) {
        const auto e = chat_error(chat_body(c.extra));
        EXPECT_EQ(e.status(), 400) << c.extra.dump();
        EXPECT_EQ(e.param(), c.param) << c.extra.dump() << " -> " << e.what();
        EXPECT_EQ(e.to_json()["error"]["type"], "invalid_request_error");
        EXPECT_FALSE(std::string(e.what()).empty());
    }
}

TEST(ChatRequest, UnimplementedFieldsAreRejectedUnlessDefault) {
    EXPECT_NO_THROW(parse_chat_completion_request(chat_body({{"use_beam_search", false}, {"echo", false}}), kLimits));
    const auto e = chat_error(chat_body({{"prompt_logprobs", 2}}));
    EXPECT_EQ(e.code(), "unsupported_parameter");
    EXPECT_EQ(e.param(), "prompt_logprobs");
    RequestLimits with_json = kLimits;
    with_json.structured_output = true;
    const auto r = parse_chat_completion_request(
        chat_body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "object"}}}}}}}}),
        with_json);
    EXPECT_EQ(r.response_format.type, ResponseFormat::Type::json_schema);
}

TEST(ChatRequest, BodyMustBeAnObject) {
    const auto e = chat_error(json::array());
    EXPECT_EQ(e.status(), 400);
    EXPECT_TRUE(e.to_json()["error"]["param"].is_null());
}

TEST(JsonBody, MalformedJsonAndInvalidUtf8AreClean400s) {
    for (const std::string body : {"{", "{\"a\": }", "", "\xff\xfe", "{\"a\":\"\xc3\x28\"}", "[1,2,,]", "{\"n\": 1e400}"}) {
        const auto e = expect_error([&] { parse_json_body(body); });
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.code(), "invalid_json");
    }
    const auto deep = expect_error([&] { parse_json_body(std::string(100000, '[')); });
    EXPECT_EQ(deep.status(), 400);
    EXPECT_EQ(parse_json_body("{\"a\": [1, 2]}")["a"][1], 2);
}

TEST(CompletionRequest, PromptForms) {
    const auto one = parse_completion_request({{"prompt", "hello"}}, kLimits);
    ASSERT_EQ(one.prompts.size(), 1u);
    EXPECT_EQ(one.prompts[0].text, "hello");
    EXPECT_EQ(one.sampling.max_tokens, 16);
    const auto ids = parse_completion_request({{"prompt", {1, 2, 3}}}, kLimits);
    ASSERT_EQ(ids.prompts.size(), 1u);
    EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<std::int64_t>{1, 2, 3}));
    const auto batch = parse_completion_request({{"prompt", {"a", "b"}}, {"n", 2}, {"logprobs", 3}}, kLimits);
    EXPECT_EQ(batch.prompts.size(), 2u);
    EXPECT_EQ(batch.sampling.logprobs, 3);
    const auto id_batch = parse_completion_request({{"prompt", {{1, 2}, {3}}}}, kLimits);
    EXPECT_EQ(id_batch.prompts[1].token_ids, std::vector<std::int64_t>{3});
}

TEST(CompletionRequest, Errors) {
    const std::vector<BadCase> cases = {
        {json::object(), "prompt"},
        {{{"prompt", 5}}, "prompt"},
        {{{"prompt", json::array()}}, "prompt"},
        {{{"prompt", {"a", 5}}}, "prompt[1]"},
        {{{"prompt", {1, "a"}}}, "prompt[1]"},
        {{{"prompt", {{1}, json::array()}}}, "prompt[1]"},
        {{{"prompt", "x"}, {"suffix", "y"}}, "suffix"},
        {{{"prompt", "x"}, {"best_of", 3}}, "best_of"},
        {{{"prompt", "x"}, {"logprobs", true}}, "logprobs"},
        {{{"prompt", "x"}, {"logprobs", 50}}, "logprobs"},
        {{{"prompt", "x"}, {"echo", true}, {"logprobs", 1}}, "echo"},
        {{{"prompt", "x"}, {"min_tokens", 20}}, "min_tokens"},
        {{{"prompt", "x"}, {"max_completion_tokens", 0}, {"max_tokens", 0}}, "max_tokens"},
    };
    for (const auto& c : cases) {
        const auto e = expect_error([&] { parse_completion_request(c.extra, kLimits); });
        EXPECT_EQ(e.status(), 400) << c.extra.dump();
        EXPECT_EQ(e.param(), c.param) << c.extra.dump() << " -> " << e.what();
    }
}

TEST(TokenizeRequest, PromptOrMessages) {
    const auto p = parse_tokenize_request({{"prompt", "hi"}}, kLimits);
    EXPECT_EQ(p.prompt, "hi");
    EXPECT_TRUE(p.add_special_tokens);
    const auto m = parse_tokenize_request({{"messages", {{{"role", "user"}, {"content", "x"}}}}}, kLimits);
    ASSERT_TRUE(m.chat.has_value());
    EXPECT_FALSE(m.add_special_tokens);
    EXPECT_EQ(expect_error([&] { parse_tokenize_request(json::object(), kLimits); }).status(), 400);
    EXPECT_EQ(parse_detokenize_request({{"tokens", {1, 2}}}).tokens.size(), 2u);
    EXPECT_EQ(expect_error([&] { parse_detokenize_request({{"tokens", {1, -2}}}); }).param(), "tokens[1]");
}

TEST(ApiErrorEnvelope, HasAllFourFields) {
    const auto j = invalid_request("temperature", "bad").to_json();
    EXPECT_EQ(j, json::parse(R"({"error":{"message":"bad","type":"invalid_request_error","param":"temperature",
                                 "code":null}})"));
    EXPECT_EQ(payload_too_large(10).status(), 413);
    EXPECT_EQ(authentication_failed("x").to_json()["error"]["type"], "authentication_error");
    EXPECT_EQ(not_found("x").status(), 404);
    EXPECT_EQ(too_many_requests("x").status(), 429);
    EXPECT_EQ(service_unavailable("x").status(), 503);
}

}  // namespace
}  // namespace msa::server
