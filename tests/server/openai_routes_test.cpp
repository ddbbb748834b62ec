#include "server/openai_routes.h"

#include "fake_backend.h"
#include "sse_frames.h"
#include "test_server.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace msa::server {
namespace {

using nlohmann::json;
using testing::FakeBackend;
using testing::RunningServer;
using testing::parse_sse;
using testing::Sse;
using namespace std::chrono_literals;

const std::string kNs = "]<]minimax[>[";

// The server under test: OpenAIRoutes over a FakeBackend.
class Harness {
public:
    Harness(FakeBackend::Options backend_options, FakeBackend::Script script, ServingOptions options = {})
        : backend(std::move(backend_options), std::move(script)),
          metrics("fake-model", [this] { return backend.stats(); }),
          routes(backend, metrics, with_test_defaults(std::move(options))),
          server({}, [this](HttpServer& s) { routes.register_routes(s); }) {}

    static ServingOptions with_test_defaults(ServingOptions o) {
        if (!o.tool_call_ids) {
            auto n = std::make_shared<int>(0);
            o.tool_call_ids = [n] { return "call_" + std::to_string((*n)++); };
        }
        return o;
    }

    httplib::Result post(const std::string& path, const json& body) {
        auto c = server.client();
        return c.Post(path, body.dump(), "application/json");
    }
    json post_json(const std::string& path, const json& body, int expected_status = 200) {
        auto r = post(path, body);
        EXPECT_TRUE(r);
        if (!r) return nullptr;
        EXPECT_EQ(r->status, expected_status) << r->body;
        return json::parse(r->body, nullptr, false);
    }
    Sse post_stream(const std::string& path, json body) {
        body["stream"] = true;
        auto r = post(path, body);
        EXPECT_TRUE(r);
        if (!r) return {};
        EXPECT_EQ(r->status, 200) << r->body;
        EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
        return parse_sse(r->body);
    }

    FakeBackend backend;
    ServingMetrics metrics;
    OpenAIRoutes routes;
    RunningServer server;
};

FakeBackend::Script fixed(std::string text) {
    return [text](const GenerationRequest&, const std::string&) { return text; };
}

json chat(const std::string& user, json extra = json::object()) {
    json body = {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", user}}}}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return body;
}

void expect_error(const json& body, const std::string& type, const std::string& param) {
    ASSERT_TRUE(body.contains("error")) << body.dump();
    EXPECT_EQ(body["error"]["type"], type) << body.dump();
    if (param.empty()) {
        EXPECT_TRUE(body["error"]["param"].is_null()) << body.dump();
    } else {
        EXPECT_EQ(body["error"]["param"], param) << body.dump();
    }
}

TEST(ChatCompletions, NonStreamingResponse) {
    FakeBackend::Options bo;
    bo.cached_tokens = 4;
    Harness h(bo, fixed("Hello there, friend."));
    const json r = h.post_json("/v1/chat/completions", chat("hi"));
    EXPECT_TRUE(r["id"].get<std::string>().starts_with("chatcmpl-"));
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_EQ(r["model"], "fake-model");
    EXPECT_TRUE(r["created"].is_number_integer());
    ASSERT_EQ(r["choices"].size(), 1u);
    EXPECT_EQ(r["choices"][0]["index"], 0);
    EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello there, friend.");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    const std::string prompt = h.backend.prompts().at(0);
    EXPECT_EQ(prompt, "<|user|>hi\n<|assistant|>");
    EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size());
    EXPECT_EQ(r["usage"]["completion_tokens"], 20);
    EXPECT_EQ(r["usage"]["total_tokens"], prompt.size() + 20);
    EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    // The sequence got the rest of the context as max_tokens.
    EXPECT_EQ(h.backend.requests().at(0).sampling.max_tokens, 4096 - static_cast<std::int64_t>(prompt.size()));
}

TEST(ChatCompletions, StreamShapeAndConcatenation) {
    const std::string text = "Streaming works, token by token.";
    Harness h({}, fixed(text));
    const Sse s = h.post_stream("/v1/chat/completions", chat("hi", {{"stream_options", {{"include_usage", true}}}}));
    ASSERT_GE(s.events.size(), 3u);
    EXPECT_TRUE(s.done_last);
    const std::string id = s.events[0]["id"];
    EXPECT_TRUE(id.starts_with("chatcmpl-"));
    // Role chunk first.
    EXPECT_EQ(s.events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
    std::string content;
    for (std::size_t i = 0; i < s.events.size(); ++i) {
        const auto& e = s.events[i];
        EXPECT_EQ(e["id"], id);
        EXPECT_EQ(e["object"], "chat.completion.chunk");
        if (i + 1 == s.events.size()) {
            // The usage chunk: no choices.
            EXPECT_TRUE(e["choices"].empty());
            EXPECT_EQ(e["usage"]["completion_tokens"], text.size());
            continue;
        }
        const auto& choice = e["choices"][0];
        if (i + 2 == s.events.size()) {
            EXPECT_EQ(choice["finish_reason"], "stop");
            EXPECT_EQ(choice["delta"], json::object());
        } else {
            EXPECT_TRUE(choice["finish_reason"].is_null()) << e.dump();
            EXPECT_FALSE(e.contains("usage"));
        }
        content += choice["delta"].value("content", "");
    }
    EXPECT_EQ(content, text);
}

TEST(ChatCompletions, ReasoningFieldsBothNamesNoMarkerLeak) {
    FakeBackend::Options bo;
    bo.thinking_prefill = true;
    ServingOptions so;
    so.reasoning_parser = "minimax_m3";
    so.default_chat_template_kwargs = {{"thinking_mode", "enabled"}};
    Harness h(bo, fixed("\nThe user greets me.\n</mm:think>\n\nHello!"), so);
    const json r = h.post_json("/v1/chat/completions", chat("hi"));
    const auto& m = r["choices"][0]["message"];
    EXPECT_EQ(m["content"], "Hello!");
    EXPECT_EQ(m["reasoning_content"], "The user greets me.\n");
    EXPECT_EQ(m["reasoning"], "The user greets me.\n");
    EXPECT_TRUE(r["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>() > 0);
    EXPECT_TRUE(h.backend.prompts().at(0).ends_with("<mm:think>\n"));

    const Sse s = h.post_stream("/v1/chat/completions", chat("hi"));
    std::string content, reasoning, reasoning2;
    for (const auto& e : s.events) {
        if (e["choices"].empty()) continue;
        const auto& d = e["choices"][0]["delta"];
        content += d.value("content", "");
        reasoning += d.value("reasoning_content", "");
        reasoning2 += d.value("reasoning", "");
    }
    EXPECT_EQ(content, "Hello!");
    EXPECT_EQ(reasoning, "The user greets me.\n");
    EXPECT_EQ(reasoning2, reasoning);
    EXPECT_EQ(s.raw.find("mm:think"), std::string::npos);

    // Thinking disabled per request: the template does not pre-fill, everything is content.
    const json plain = h.post_json("/v1/chat/completions",
                                   chat("hi", {{"chat_template_kwargs", {{"thinking_mode", "disabled"}}}}));
    EXPECT_EQ(plain["choices"][0]["message"]["content"], "The user greets me.\nHello!");
}

std::string m3_weather_call() {
    return "Let me look." + kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_weather\">" + kNs + "<city>Paris" + kNs +
           "</city>" + kNs + "<days>3" + kNs + "</days>" + kNs + "</invoke>\n" + kNs + "</tool_call>";
}

json weather_tools() {
    return json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
        "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])");
}

TEST(ChatCompletions, ToolCallsNonStreamAndStream) {
    ServingOptions so;
    so.tool_call_parser = "minimax_m3";
    Harness h({}, fixed(m3_weather_call()), so);
    const json r = h.post_json("/v1/chat/completions", chat("weather?", {{"tools", weather_tools()}}));
    const auto& choice = r["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_EQ(choice["message"]["content"], "Let me look.");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    const auto& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["id"], "call_0");
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}, {"days", 3}}));

    const Sse s = h.post_stream("/v1/chat/completions", chat("weather?", {{"tools", weather_tools()}}));
    std::string args;
    int fragments = 0;
    std::string finish;
    for (const auto& e : s.events) {
        const auto& c = e["choices"][0];
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
        if (!c["delta"].contains("tool_calls")) continue;
        for (const auto& f : c["delta"]["tool_calls"]) {
            EXPECT_EQ(f["index"], 0);
            if (fragments++ == 0) {
                EXPECT_EQ(f["type"], "function");
                EXPECT_EQ(f["function"]["name"], "get_weather");
                EXPECT_TRUE(f["id"].get<std::string>().starts_with("call_"));
            } else {
                EXPECT_FALSE(f.contains("id"));
            }
            args += f["function"]["arguments"].get<std::string>();
        }
    }
    EXPECT_GT(fragments, 1);  // the arguments arrived in pieces
    EXPECT_EQ(args, call["function"]["arguments"]);
    EXPECT_EQ(finish, "tool_calls");
}

TEST(ChatCompletions, ToolChoiceRequiredForcesACall) {
    ServingOptions so;
    so.tool_call_parser = "minimax_m3";
    // The model continues right after the forced prefix.
    Harness h({}, [](const GenerationRequest&, const std::string& prompt) {
        EXPECT_TRUE(prompt.ends_with(kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_weather\">")) << prompt;
        return kNs + "<city>Oslo" + kNs + "</city>" + kNs + "</invoke>\n" + kNs + "</tool_call>";
    }, so);
    const json r = h.post_json("/v1/chat/completions",
                               chat("weather?", {{"tools", weather_tools()},
                                                 {"tool_choice", {{"type", "function"},
                                                                  {"function", {{"name", "get_weather"}}}}}}));
    const auto& call = r["choices"][0]["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(call["function"]["arguments"], R"({"city":"Oslo"})");
    EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
}

TEST(ChatCompletions, ToolChoiceCheckedWhenItCannotBeForced) {
    FakeBackend::Options bo;
    bo.thinking_prefill = true;
    ServingOptions so;
    so.tool_call_parser = "minimax_m3";
    so.reasoning_parser = "minimax_m3";
    so.default_chat_template_kwargs = {{"thinking_mode", "enabled"}};
    Harness h(bo, fixed("thinking</mm:think>No tool for you."), so);
    const json r = h.post_json("/v1/chat/completions", chat("x", {{"tools", weather_tools()}, {"tool_choice", "required"}}),
                               500);
    expect_error(r, "server_error", "tool_choice");
}

TEST(ChatCompletions, ToolsWithoutParserAre400) {
    Harness h({}, fixed(m3_weather_call()));
    const json r = h.post_json("/v1/chat/completions", chat("x", {{"tools", weather_tools()}}), 400);
    expect_error(r, "invalid_request_error", "tool_choice");
    // tool_choice none is fine: the text is content.
    const json ok = h.post_json("/v1/chat/completions", chat("x", {{"tools", weather_tools()}, {"tool_choice", "none"}}));
    EXPECT_EQ(ok["choices"][0]["message"]["content"], m3_weather_call());
}

TEST(ChatCompletions, SeveralChoicesLogprobsAndStop) {
    Harness h({}, fixed("abcdefgh STOP more"));
    const json r = h.post_json("/v1/chat/completions",
                               chat("x", {{"n", 2}, {"seed", 7}, {"logprobs", true}, {"top_logprobs", 2}, {"stop", "STOP"}}));
    ASSERT_EQ(r["choices"].size(), 2u);
    for (int i = 0; i < 2; ++i) {
        const auto& c = r["choices"][i];
        EXPECT_EQ(c["index"], i);
        EXPECT_EQ(c["message"]["content"], "abcdefgh ");
        EXPECT_EQ(c["stop_reason"], "STOP");
        const auto& lp = c["logprobs"]["content"];
        ASSERT_EQ(lp.size(), 9u);
        EXPECT_EQ(lp[0]["token"], "a");
        EXPECT_EQ(lp[0]["bytes"], json({97}));
        EXPECT_EQ(lp[1]["logprob"], -0.25);
        ASSERT_EQ(lp[0]["top_logprobs"].size(), 2u);
    }
    EXPECT_EQ(r["usage"]["completion_tokens"], 18);
    const auto requests = h.backend.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_NE(requests[0].sampling.seed, requests[1].sampling.seed);  // n samples, not n copies
}

TEST(ChatCompletions, MaxTokensGivesLength) {
    Harness h({}, fixed("a long answer that will be cut"));
    const json r = h.post_json("/v1/chat/completions", chat("x", {{"max_tokens", 5}}));
    EXPECT_EQ(r["choices"][0]["message"]["content"], "a lon");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
}

TEST(ChatCompletions, ErrorsUseTheEnvelope) {
    FakeBackend::Options bo;
    bo.max_model_len = 40;
    Harness h(bo, fixed("ok"));
    expect_error(h.post_json("/v1/chat/completions", chat("x", {{"model", "other"}}), 404), "not_found_error", "model");
    auto r = h.server.client().Post("/v1/chat/completions", "{bad json", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    expect_error(json::parse(r->body), "invalid_request_error", "");
    expect_error(h.post_json("/v1/chat/completions", chat("x", {{"temperature", "hot"}}), 400), "invalid_request_error",
                 "temperature");
    // Context overflow: the prompt plus max_tokens exceed max_model_len.
    const json overflow = h.post_json("/v1/chat/completions", chat("x", {{"max_tokens", 100}}), 400);
    expect_error(overflow, "invalid_request_error", "messages");
    EXPECT_NE(overflow["error"]["message"].get<std::string>().find("maximum context length is 40 tokens"),
              std::string::npos);
    EXPECT_EQ(overflow["error"]["code"], "context_length_exceeded");
    const json long_prompt = h.post_json("/v1/chat/completions", chat(std::string(100, 'x')), 400);
    expect_error(long_prompt, "invalid_request_error", "messages");
    EXPECT_EQ(h.backend.submitted(), 0u);  // nothing invalid reached the engine
}

TEST(ChatCompletions, QueueFullIs429AndLoadingIs503) {
    FakeBackend::Options bo;
    bo.max_running = 1;
    // The first choice must still be running when the second is submitted (a 2-token "ok" could finish first and
    // free its slot: the test failed that way under load). The 429 cancels it, which ends the wait at once.
    bo.first_event_delay = std::chrono::seconds(30);
    Harness h(bo, fixed("ok"));
    expect_error(h.post_json("/v1/chat/completions", chat("x", {{"n", 2}}), 429), "rate_limit_error", "");
    EXPECT_EQ(h.backend.cancelled(), 1u);  // the one admitted was cancelled again
    h.backend.set_ready(false);
    expect_error(h.post_json("/v1/chat/completions", chat("x"), 503), "service_unavailable_error", "");
    auto health = h.server.client().Get("/health");
    EXPECT_EQ(health->status, 503);
    expect_error(json::parse(health->body), "service_unavailable_error", "");
    h.backend.set_ready(true);
    EXPECT_EQ(h.server.client().Get("/health")->status, 200);
}

TEST(ChatCompletions, ErrorAfterHeadersIsAFrameThenDone) {
    Harness h({}, fixed("partial output then failure"));
    h.backend.fail_with(internal_error("The engine failed."), 6);
    const Sse s = h.post_stream("/v1/chat/completions", chat("x"));
    ASSERT_FALSE(s.events.empty());
    expect_error(s.events.back(), "server_error", "");
    EXPECT_TRUE(s.done_last);
    const json r = h.post_json("/v1/chat/completions", chat("x"), 500);
    expect_error(r, "server_error", "");
}

TEST(ChatCompletions, PingsWhileWaitingForTheFirstToken) {
    FakeBackend::Options bo;
    bo.first_event_delay = 600ms;
    ServingOptions so;
    so.ping_interval = 100ms;
    so.poll_interval = 20ms;
    Harness h(bo, fixed("late"), so);
    const Sse s = h.post_stream("/v1/chat/completions", chat("x"));
    EXPECT_GE(s.pings, 3);
    EXPECT_TRUE(s.done_last);
    EXPECT_NE(s.raw.find(": ping\n\n"), std::string::npos);
}

TEST(ChatCompletions, ClientDisconnectCancelsTheSequence) {
    FakeBackend::Options bo;
    bo.event_delay = 50ms;
    bo.bytes_per_event = 1;
    Harness h(bo, fixed(std::string(2000, 'z')));
    const std::string got =
        testing::post_then_disconnect(h.server.port(), "/v1/chat/completions", chat("x", {{"stream", true}}).dump(),
                                      "\"z\"");
    ASSERT_NE(got.find("\"z\""), std::string::npos) << got;
    for (int i = 0; i < 200 && (h.backend.cancelled() == 0 || h.backend.running() > 0); ++i) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(h.backend.cancelled(), 1u);
    EXPECT_EQ(h.backend.running(), 0u);
    EXPECT_NE(h.metrics.render().find("finished_reason=\"abort\"} 1"), std::string::npos);
}

TEST(Completions, TextEchoStreamAndLogprobs) {
    Harness h({}, fixed(" world"));
    json r = h.post_json("/v1/completions", {{"prompt", "hello"}, {"echo", true}});
    EXPECT_TRUE(r["id"].get<std::string>().starts_with("cmpl-"));
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], "hello world");
    EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(r["usage"]["completion_tokens"], 6);
    EXPECT_EQ(h.backend.requests().at(0).sampling.max_tokens, 16);  // OpenAI's default for completions

    r = h.post_json("/v1/completions", {{"prompt", {{104, 105}, {120}}}, {"n", 2}, {"logprobs", 1}});
    ASSERT_EQ(r["choices"].size(), 4u);
    EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(r["usage"]["completion_tokens"], 24);
    const auto& lp = r["choices"][3]["logprobs"];
    EXPECT_EQ(lp["tokens"].size(), 6u);
    EXPECT_EQ(lp["text_offset"], json({0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);  // the sampled token and one alternative

    const Sse s = h.post_stream("/v1/completions", {{"prompt", "hello"}, {"stream_options", {{"include_usage", true}}}});
    std::string text;
    for (const auto& e : s.events) {
        EXPECT_EQ(e["object"], "text_completion");
        if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
    }
    EXPECT_EQ(text, " world");
    EXPECT_EQ(s.events.back()["usage"]["total_tokens"], 11);
    EXPECT_TRUE(s.done_last);
    expect_error(h.post_json("/v1/completions", {{"prompt", {999}}}, 400), "invalid_request_error", "prompt[0]");
}

TEST(UtilityRoutes, ModelsTokenizeDetokenizeMetrics) {
    Harness h({}, fixed("ok"));
    const json models = json::parse(h.server.client().Get("/v1/models")->body);
    EXPECT_EQ(models["object"], "list");
    EXPECT_EQ(models["data"][0]["id"], "fake-model");
    EXPECT_EQ(models["data"][0]["object"], "model");
    EXPECT_EQ(models["data"][0]["max_model_len"], 4096);

    const json t = h.post_json("/tokenize", {{"prompt", "abc"}, {"return_token_strs", true}});
    EXPECT_EQ(t["tokens"], json({97, 98, 99}));
    EXPECT_EQ(t["count"], 3);
    EXPECT_EQ(t["token_strs"], json({"a", "b", "c"}));
    const json tm = h.post_json("/tokenize", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
    EXPECT_EQ(tm["count"], std::string("<|user|>x\n<|assistant|>").size());
    EXPECT_EQ(h.post_json("/detokenize", {{"tokens", {104, 105}}})["prompt"], "hi");
    expect_error(h.post_json("/detokenize", {{"tokens", {104, 300}}}, 400), "invalid_request_error", "tokens[1]");

    h.post_json("/v1/chat/completions", chat("x"));
    auto m = h.server.client().Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_TRUE(m->get_header_value("Content-Type").starts_with("text/plain; version=0.0.4"));
    EXPECT_NE(m->body.find("vllm:request_success_total{model_name=\"fake-model\",finished_reason=\"stop\"} 1"),
              std::string::npos)
        << m->body;
    EXPECT_NE(m->body.find("vllm:prefix_cache_hits_total{model_name=\"fake-model\"} 25"), std::string::npos);
    EXPECT_NE(m->body.find("vllm:generation_tokens_total{model_name=\"fake-model\"} 2"), std::string::npos);
}

}  // namespace
}  // namespace msa::server
