// EngineBackend end to end inside one process: the OpenAI routes over the real engine, the real tokenizer (the tiny
// test vocabulary) and the MiniMax chat template, with the engine tests' deterministic fake model. Expectations
// come from the fake model's own reference (greedy continuation computed from the token list, no pages) and from
// rendering/tokenizing independently of the backend.
#include "server/engine_backend.h"
#include "server/openai_routes.h"

#include "engine/fake_model.h"
#include "sse_frames.h"
#include "test_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <latch>
#include <sstream>

namespace msa::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using msa::testing::FakeModel;
using testing::parse_sse;
using testing::RunningServer;

constexpr std::int32_t kEos = 656;  // <|endoftext|> of the tiny tokenizer

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

ChatTemplate minimax_template() {
    return ChatTemplate(read_file(MSA_SOURCE_DIR "/tools/chat/templates/minimax_m3.jinja"),
                        {{"bos_token", "]~!b["}, {"eos_token", "[e~["}}, "minimax_m3.jinja");
}

// The tokenizer as a TokenTextSource, plainly.
class TokenizerText final : public TokenTextSource {
public:
    explicit TokenizerText(const Tokenizer& t) : t_(t) {}
    std::string_view token_bytes(std::int32_t id) const override { return t_.token_bytes(id); }
    bool is_special(std::int32_t id) const override { return t_.is_special(id); }

private:
    const Tokenizer& t_;
};

struct Stack {
    explicit Stack(std::int32_t max_model_len = 2048, std::int32_t max_waiting = 1024, std::int32_t pages = 64)
        : tokenizer(Tokenizer::from_file(MSA_SOURCE_DIR "/tests/tokenizer/data/tiny_tokenizer.json")),
          chat_template(minimax_template()),
          base_text(tokenizer),
          text(base_text, tokenizer, parser_marker_tokens()),
          model(static_cast<std::int32_t>(tokenizer.id_limit()), pages, max_model_len),
          engine(config(max_waiting), model, &text),
          backend(engine, tokenizer, chat_template, text, {"tiny", "/models/tiny", 1700000000, {}}),
          metrics("tiny", [this] { return backend.stats(); }),
          routes(backend, metrics, {}),
          server({}, [this](HttpServer& s) { routes.register_routes(s); }) {}

    static EngineConfig config(std::int32_t max_waiting) {
        EngineConfig c;
        c.eos_token_ids = {kEos};
        c.max_waiting_requests = max_waiting;
        c.scheduler.max_num_seqs = 8;
        c.check_invariants_every_step = true;
        return c;
    }

    json post(const std::string& path, const json& body, int status = 200) {
        auto c = server.client();
        auto r = c.Post(path, body.dump(), "application/json");
        EXPECT_TRUE(r);
        if (!r) return nullptr;
        EXPECT_EQ(r->status, status) << r->body;
        return json::parse(r->body, nullptr, false);
    }

    // What the model continues from, rendered and tokenized without the backend.
    std::vector<std::int32_t> prompt_of(const json& messages) const {
        ChatRequest r;
        r.messages = nlohmann::ordered_json::parse(messages.dump());
        return tokenizer.encode(chat_template.render(r), false);
    }

    // The greedy continuation from the fake model's reference logits: argmax, ties to the lower id, until EOS or
    // max_tokens; returns the token ids (EOS included when reached).
    std::vector<std::int32_t> greedy(std::vector<std::int32_t> tokens, int max_tokens) const {
        std::vector<std::int32_t> out;
        while (static_cast<int>(out.size()) < max_tokens) {
            const auto logits = model.reference_logits(tokens);
            const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            out.push_back(next);
            tokens.push_back(next);
            if (next == kEos) break;
        }
        return out;
    }

    Tokenizer tokenizer;
    ChatTemplate chat_template;
    TokenizerText base_text;
    MarkerTextSource text;
    FakeModel model;
    Engine engine;
    EngineBackend backend;
    ServingMetrics metrics;
    OpenAIRoutes routes;
    RunningServer server;
};

const json kMessages = json::array({{{"role", "user"}, {"content", "Tell me about sparse attention."}}});

json chat(int max_tokens, json extra = json::object()) {
    json body = {{"model", "tiny"}, {"messages", kMessages}, {"max_tokens", max_tokens}, {"temperature", 0}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return body;
}

TEST(EngineBackend, GreedyChatMatchesTheModelsReference) {
    Stack s;
    const auto prompt = s.prompt_of(kMessages);
    const auto expected = s.greedy(prompt, 24);
    const json r = s.post("/v1/chat/completions", chat(24));
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    EXPECT_EQ(r["choices"][0]["message"]["content"], s.tokenizer.decode(expected, true));
    EXPECT_EQ(r["choices"][0]["finish_reason"], expected.back() == kEos ? "stop" : "length");
    EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size());
    EXPECT_EQ(r["usage"]["completion_tokens"], expected.size());
}

TEST(EngineBackend, StreamConcatenatesToTheSameTextWithUsage) {
    Stack s;
    const json full = s.post("/v1/chat/completions", chat(20));
    json body = chat(20, {{"stream", true}, {"stream_options", {{"include_usage", true}}}});
    auto c = s.server.client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    const auto sse = parse_sse(r->body);
    EXPECT_TRUE(sse.done_last);
    std::string text;
    for (const auto& e : sse.events) {
        if (!e["choices"].empty()) text += e["choices"][0]["delta"].value("content", "");
    }
    EXPECT_EQ(text, full["choices"][0]["message"]["content"]);
    EXPECT_EQ(sse.events.back()["usage"], full["usage"]);
}

TEST(EngineBackend, StopStringCutsTheText) {
    Stack s;
    const auto expected = s.greedy(s.prompt_of(kMessages), 40);
    const std::string text = s.tokenizer.decode(expected, true);
    ASSERT_GE(text.size(), 8u) << "the reference continuation is too short for this test";
    const std::string stop = text.substr(4, 3);
    const json r = s.post("/v1/chat/completions", chat(40, {{"stop", stop}}));
    EXPECT_EQ(r["choices"][0]["message"]["content"], text.substr(0, text.find(stop)));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(r["choices"][0]["stop_reason"], stop);
}

TEST(EngineBackend, SeededSamplesAreReproducibleAndDistinctPerChoice) {
    Stack s;
    const json body = chat(16, {{"n", 3}, {"temperature", 1.5}, {"seed", 7}});
    const json a = s.post("/v1/chat/completions", body);
    const json b = s.post("/v1/chat/completions", body);
    ASSERT_EQ(a["choices"].size(), 3u);
    EXPECT_EQ(a["choices"], b["choices"]);
    EXPECT_EQ(a["usage"]["prompt_tokens"], s.prompt_of(kMessages).size());
}

TEST(EngineBackend, LogprobsAreTheModelsDistribution) {
    Stack s;
    const auto prompt = s.prompt_of(kMessages);
    const json r = s.post("/v1/chat/completions", chat(6, {{"logprobs", true}, {"top_logprobs", 3}}));
    const auto& content = r["choices"][0]["logprobs"]["content"];
    ASSERT_FALSE(content.empty()) << r.dump();
    // First token: log-softmax of the reference logits after the prompt.
    const auto logits = s.model.reference_logits(prompt);
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float l : logits) sum += std::exp(static_cast<double>(l - mx));
    const double best = -std::log(sum);  // the greedy token's logprob
    EXPECT_NEAR(content[0]["logprob"].get<double>(), best, 1e-3);
    ASSERT_EQ(content[0]["top_logprobs"].size(), 3u);
    EXPECT_NEAR(content[0]["top_logprobs"][0]["logprob"].get<double>(), best, 1e-3);
    EXPECT_GE(content[0]["top_logprobs"][0]["logprob"], content[0]["top_logprobs"][1]["logprob"]);
}

TEST(EngineBackend, TemplateKwargsAndToolsReachThePrompt) {
    Stack s;
    json body = {{"model", "tiny"},
                 {"messages", kMessages},
                 {"tools", {{{"type", "function"},
                             {"function", {{"name", "grep_repo"}, {"parameters", {{"type", "object"}}}}}}}},
                 {"chat_template_kwargs", {{"thinking_mode", "disabled"}}}};
    const json t = s.post("/tokenize", body);
    const std::string prompt = s.tokenizer.decode(t["tokens"].get<std::vector<std::int32_t>>(), false);
    EXPECT_NE(prompt.find("grep_repo"), std::string::npos) << prompt;
    EXPECT_TRUE(prompt.ends_with("<mm:think>\n</mm:think>\n\n")) << prompt;
    // The request parser refuses a bad thinking_mode before the template runs...
    body["chat_template_kwargs"]["thinking_mode"] = "sometimes";
    EXPECT_EQ(s.post("/tokenize", body, 400)["error"]["param"], "chat_template_kwargs.thinking_mode");
    // ...and whatever the template itself refuses (raise_exception) is a 400 naming messages, not a 500.
    ChatCompletionRequest r;
    r.messages.push_back({});
    r.chat_template_kwargs["thinking_mode"] = "sometimes";
    try {
        s.backend.render_chat(r);
        ADD_FAILURE() << "the template accepted thinking_mode 'sometimes'";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.param(), "messages");
        EXPECT_NE(std::string(e.what()).find("thinking_mode"), std::string::npos) << e.what();
    }
}

TEST(EngineBackend, ContextOverflowIs400) {
    Stack s(/*max_model_len=*/256);
    const json r = s.post("/v1/chat/completions", chat(1000), 400);
    EXPECT_EQ(r["error"]["code"], "context_length_exceeded");
    const json c = s.post("/v1/completions", {{"model", "tiny"}, {"prompt", std::string(2000, 'x')}}, 400);
    EXPECT_EQ(c["error"]["code"], "context_length_exceeded");
}

TEST(EngineBackend, ClientDisconnectFreesThePagesAtOnce) {
    Stack s;
    // Hold the engine 300 token writes in until the client is gone and the server has cancelled the request (its
    // stream records the abort right after cancelling): otherwise a loaded machine may let the engine write all 1500
    // tokens before the HTTP thread notices the closed connection, and the request ends by length, not abort.
    std::mutex mu;
    std::condition_variable cv;
    bool client_gone = false;
    bool server_cancelled = false;
    int writes = 0;
    const auto abort_recorded = [&] {
        return s.metrics.render().find("finished_reason=\"abort\"} 1") != std::string::npos;
    };
    s.model.on_write = [&](PageId) {
        std::unique_lock lock(mu);
        if (++writes <= 300 || server_cancelled) return;
        cv.wait_for(lock, 60s, [&] { return client_gone; });
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (!abort_recorded() && std::chrono::steady_clock::now() < deadline) {
            lock.unlock();
            std::this_thread::sleep_for(2ms);
            lock.lock();
        }
        server_cancelled = true;
    };
    json body = chat(1500, {{"stream", true}, {"ignore_eos", true}});
    const std::string got =
        testing::post_then_disconnect(s.server.port(), "/v1/chat/completions", body.dump(), "\"content\":\"");
    {
        std::lock_guard lock(mu);
        client_gone = true;
    }
    cv.notify_all();
    ASSERT_NE(got.find("\"content\":\""), std::string::npos) << got;
    // Generous bound: the engine notices the disconnect at its next step, which a loaded machine can delay by
    // seconds (5 s was seen to run out at load 8 on 2 cores). What is checked is the state after the abort.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    EngineStats st = s.engine.stats();
    // Stats are published after each engine step: wait for the aborted request to show up in them.
    while ((st.finished[static_cast<int>(FinishReason::abort)] == 0 || st.num_running > 0 || st.num_waiting > 0) &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
        st = s.engine.stats();
    }
    EXPECT_EQ(st.num_running, 0);
    EXPECT_EQ(st.finished[static_cast<int>(FinishReason::abort)], 1);
    EXPECT_EQ(st.kv_cache_usage, 0.0);
    EXPECT_EQ(st.num_free_pages, st.num_pages);  // free includes cached pages no sequence references
}

TEST(EngineBackend, FullQueueIs429AndShutdownIs503) {
    Stack s(2048, /*max_waiting=*/1);
    // Hold the engine thread inside its first forward so that submissions pile up in the queue.
    std::latch inside(1), release(1);
    bool first = true;
    s.model.on_write = [&](PageId) {
        if (!first) return;
        first = false;
        inside.count_down();
        release.wait();
    };
    GenerationRequest g;
    g.prompt_tokens = {1, 2, 3};
    g.sampling.max_tokens = 2;
    std::atomic<int> finished{0};
    auto count = [&](GenerationEvent&& e) { finished += e.finished ? 1 : 0; };
    s.backend.submit(g, count);
    inside.wait();
    s.backend.submit(g, count);  // waits
    const json r = s.post("/v1/chat/completions", chat(4), 429);
    EXPECT_EQ(r["error"]["type"], "rate_limit_error");
    release.count_down();
    while (finished < 2) std::this_thread::sleep_for(1ms);
    s.engine.shutdown();
    const json down = s.post("/v1/chat/completions", chat(4), 503);
    EXPECT_EQ(down["error"]["type"], "service_unavailable_error");
}

TEST(EngineBackend, MarkerTokensStayTextWhenSpecial) {
    Stack s;
    MarkerTextSource marked(s.base_text, s.tokenizer, {"<|im_start|>", "<not a token>"});
    const auto id = *s.tokenizer.token_to_id("<|im_start|>");
    EXPECT_TRUE(s.base_text.is_special(id));
    EXPECT_FALSE(marked.is_special(id));
    EXPECT_TRUE(marked.is_special(kEos));
    EXPECT_EQ(marked.token_bytes(id), s.base_text.token_bytes(id));
}

TEST(EngineBackend, ModelDefaultsApplyWhenTheRequestIsSilent) {
    Stack s;
    SamplingParams defaults;
    defaults.temperature = 0.6f;
    defaults.top_k = 40;
    EngineBackend b(s.engine, s.tokenizer, s.chat_template, s.text, {"x", "/x", 0, defaults});
    SamplingOptions o;
    EXPECT_FLOAT_EQ(b.sampling_params(o).temperature, 0.6f);
    EXPECT_EQ(b.sampling_params(o).top_k, 40);
    o.temperature = 0.0;
    o.top_k = -1;
    EXPECT_FLOAT_EQ(b.sampling_params(o).temperature, 0.0f);
    EXPECT_EQ(b.sampling_params(o).top_k, -1);
}

}  // namespace
}  // namespace msa::server
