// The engine API end to end with the fake model and fake tokenizer text: request lifecycle and events, stop
// conditions, text streaming, logprobs, n > 1, seeds, errors (validation, context overflow, queue full, model
// failure), cancellation, shutdown, speculative decoding, and a multi-threaded stress run with invariants checked
// after every step and outputs compared with a page-free reference.
#include "engine/engine.h"
#include "core/error.h"
#include "core/parallel.h"
#include "engine/fake_model.h"
#include "engine/fake_text.h"
#include "engine/request_error.h"
#include "engine/utf8_assembler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <thread>

namespace msa {
namespace {

using testing::FakeModel;
using testing::FakeText;

constexpr std::int32_t kVocab = 64;
constexpr std::int32_t kEos = 0;

// A model whose forward() blocks until the test lets a step through, to freeze the engine between steps.
class GatedModel : public ModelExecutor {
public:
    explicit GatedModel(FakeModel& inner) : inner_(inner) {}
    void forward(const ForwardBatch& b, const ForwardOptions& o, ForwardOutput& out) override {
        std::unique_lock lock(mu_);
        ++entered_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return permits_ > 0; });
        --permits_;
        lock.unlock();
        inner_.forward(b, o, out);
    }
    std::int32_t vocab_size() const override { return inner_.vocab_size(); }
    std::int32_t num_kv_pages() const override { return inner_.num_kv_pages(); }
    std::int32_t page_size() const override { return inner_.page_size(); }
    std::int32_t max_model_len() const override { return inner_.max_model_len(); }

    void allow(int steps) {
        std::lock_guard lock(mu_);
        permits_ += steps;
        cv_.notify_all();
    }
    void open() { allow(1 << 30); }
    // Waits until forward() has been entered `n` times in total.
    void wait_entered(int n) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return entered_ >= n; });
    }

private:
    FakeModel& inner_;
    std::mutex mu_;
    std::condition_variable cv_;
    int permits_ = 0, entered_ = 0;
};

struct Collected {
    std::vector<std::vector<std::int32_t>> tokens;
    std::vector<std::string> text;
    std::vector<std::optional<FinishReason>> finish;
    std::vector<std::variant<std::monostate, std::int32_t, std::string>> stop_reason;
    std::vector<std::vector<SampledToken>> logprobs;
    std::optional<Usage> usage;
    std::optional<RequestTimings> timings;
    std::string error;
    int events = 0;
};

// Drains a handle and checks the event protocol: deltas only for live samples, exactly one final event.
Collected collect(RequestHandle& h, int n) {
    Collected c;
    c.tokens.resize(n);
    c.text.resize(n);
    c.finish.resize(n);
    c.stop_reason.resize(n);
    c.logprobs.resize(n);
    bool finished = false;
    while (auto ev = h.next()) {
        EXPECT_FALSE(finished) << "an event after the final one";
        ++c.events;
        for (auto& d : ev->samples) {
            EXPECT_FALSE(c.finish[d.index].has_value()) << "a delta after sample " << d.index << " finished";
            c.tokens[d.index].insert(c.tokens[d.index].end(), d.token_ids.begin(), d.token_ids.end());
            c.text[d.index] += d.text;
            for (auto& lp : d.logprobs) c.logprobs[d.index].push_back(lp);
            if (d.finish_reason) {
                c.finish[d.index] = d.finish_reason;
                c.stop_reason[d.index] = d.stop_reason;
            }
        }
        if (ev->finished) {
            finished = true;
            c.usage = ev->usage;
            c.timings = ev->timings;
            c.error = ev->error;
        }
    }
    EXPECT_TRUE(finished);
    for (int i = 0; i < n; ++i) EXPECT_TRUE(c.finish[i].has_value()) << "sample " << i << " never finished";
    return c;
}

// What a request generates, computed without the engine: the fake model's logits from the token list.
std::vector<std::int32_t> reference(const FakeModel& model, const std::vector<std::int32_t>& prompt,
                                    const SamplingParams& p, std::uint64_t seed, int stream, int max_model_len) {
    Sampler sampler(SamplerConfig{model.vocab_size(), {kEos}, LogprobsMode::raw});
    TokenHistory history(prompt, p.repetition_penalty != 1.0f);
    RequestRng rng(seed, stream);
    std::vector<std::int32_t> tokens = prompt, out;
    const int max_tokens = p.max_tokens.value_or(max_model_len - static_cast<int>(prompt.size()));
    while (static_cast<int>(out.size()) < max_tokens) {
        const auto t = sampler.sample(model.reference_logits(tokens), p, history, rng, out.size()).token;
        out.push_back(t);
        tokens.push_back(t);
        history.add_output(t);
        const bool active = static_cast<int>(out.size()) >= p.min_tokens;
        const bool stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) != p.stop_token_ids.end();
        if (active && ((!p.ignore_eos && t == kEos) || stop_id)) break;
    }
    return out;
}

// The text a whole token sequence decodes to at once (the streamed text must equal it).
std::string text_of(const FakeText& text, const std::vector<std::int32_t>& tokens) {
    std::string out;
    Utf8Assembler a;
    a.push(text.bytes_of(tokens), out);
    a.flush(out);
    return out;
}

std::vector<std::int32_t> prompt_of(int n, int salt) {
    std::vector<std::int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 2 + (i * 5 + salt * 11) % (kVocab - 2);
    return t;
}

EngineConfig base_config() {
    EngineConfig c;
    c.scheduler.page_size = 0;  // from the model
    c.scheduler.max_num_batched_tokens = 64;
    c.scheduler.max_num_seqs = 16;
    c.eos_token_ids = {kEos};
    c.check_invariants_every_step = true;
    return c;
}

SamplingParams sampled(std::uint64_t seed, int max_tokens) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.seed = seed;
    p.max_tokens = max_tokens;
    return p;
}

TEST(Engine, GeneratesWhatTheReferenceGenerates) {
    FakeModel model(kVocab, 64, 256, 16);
    Engine engine(base_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(40, 1);
    req.params = sampled(7, 30);
    auto h = engine.submit(req);
    const Collected c = collect(*h, 1);
    EXPECT_EQ(c.tokens[0], reference(model, req.prompt, req.params, 7, 0, 256));
    EXPECT_TRUE(c.error.empty());
    ASSERT_TRUE(c.usage);
    EXPECT_EQ(c.usage->prompt_tokens, 40);
    EXPECT_EQ(c.usage->completion_tokens, static_cast<int>(c.tokens[0].size()));
    ASSERT_TRUE(c.timings);
    EXPECT_GE(c.timings->e2e, c.timings->ttft);
    EXPECT_GE(c.timings->ttft, c.timings->queue);
    EXPECT_GE(c.events, 2);  // streamed, not one lump
    // Greedy too.
    req.params.temperature = 0.0f;
    const Collected g = collect(*engine.submit(req), 1);
    EXPECT_EQ(g.tokens[0], reference(model, req.prompt, req.params, 0, 0, 256));
}

TEST(Engine, StreamsTextAndStopsAtAStopStringAcrossTokens) {
    FakeModel model(kVocab, 64, 256, 16);
    FakeText text(kVocab);
    Engine engine(base_config(), model, &text);
    GenerateRequest req;
    req.prompt = prompt_of(20, 2);
    req.params = sampled(11, 60);
    req.params.ignore_eos = true;
    const auto full = reference(model, req.prompt, req.params, 11, 0, 256);
    const Collected plain = collect(*engine.submit(req), 1);
    ASSERT_EQ(plain.tokens[0], full);
    // The text is the UTF-8 of the token bytes (lossy for the split characters the fake vocabulary has).
    const std::string expected_text = text_of(text, full);
    EXPECT_EQ(plain.text[0], expected_text);

    // Pick a stop string that spans a token boundary in the second half of that text: the last character before
    // an ASCII token and that token's first character.
    int stop_token_index = -1;
    std::string so_far;
    for (std::size_t i = 0; i < full.size(); ++i) {
        const std::string_view piece = text.token_bytes(full[i]);
        const bool ascii_boundary = !text.is_special(full[i]) && !piece.empty() && !so_far.empty() &&
                                    static_cast<unsigned char>(piece[0]) < 0x80 &&
                                    static_cast<unsigned char>(so_far.back()) < 0x80;
        if (i >= full.size() / 2 && ascii_boundary) {
            stop_token_index = static_cast<int>(i);
            break;
        }
        if (!text.is_special(full[i])) so_far += piece;
    }
    ASSERT_GE(stop_token_index, 0);
    const std::string stop =
        so_far.substr(so_far.size() - 1) + std::string(text.token_bytes(full[stop_token_index]).substr(0, 1));
    req.params.stop = {stop};
    const Collected c = collect(*engine.submit(req), 1);
    EXPECT_EQ(c.finish[0], FinishReason::stop);
    EXPECT_EQ(std::get<std::string>(c.stop_reason[0]), stop);
    const std::size_t cut = expected_text.find(stop);
    ASSERT_NE(cut, std::string::npos);
    EXPECT_EQ(c.text[0], expected_text.substr(0, cut));
    EXPECT_LE(c.tokens[0].size(), static_cast<std::size_t>(stop_token_index + 1));
    // With include_stop_str_in_output the stop string stays.
    req.params.include_stop_str_in_output = true;
    EXPECT_EQ(collect(*engine.submit(req), 1).text[0], expected_text.substr(0, cut + stop.size()));
}

TEST(Engine, StopTokenIdsEosMinTokensAndMaxTokens) {
    FakeModel model(kVocab, 64, 256, 16);
    FakeText text(kVocab);
    Engine engine(base_config(), model, &text);
    GenerateRequest req;
    req.prompt = prompt_of(10, 3);
    req.params = sampled(5, 40);
    req.params.ignore_eos = true;
    const auto full = reference(model, req.prompt, req.params, 5, 0, 256);
    const std::int32_t stop_id = full[12];
    req.params.stop_token_ids = {stop_id};
    req.params.ignore_eos = false;
    const Collected c = collect(*engine.submit(req), 1);
    EXPECT_EQ(c.tokens[0], reference(model, req.prompt, req.params, 5, 0, 256));
    if (c.tokens[0].back() == stop_id) {
        EXPECT_EQ(c.finish[0], FinishReason::stop);
        EXPECT_EQ(std::get<std::int32_t>(c.stop_reason[0]), stop_id);
        // The stop token's text is not part of the output.
        EXPECT_EQ(c.text[0], text_of(text, std::vector<std::int32_t>(c.tokens[0].begin(), c.tokens[0].end() - 1)));
    }

    // A huge bias makes EOS certain: generation stops at once, unless ignore_eos or min_tokens say otherwise.
    GenerateRequest eos_req;
    eos_req.prompt = prompt_of(10, 4);
    eos_req.params = sampled(1, 20);
    eos_req.params.logit_bias = {{kEos, 100.0f}};
    Collected e = collect(*engine.submit(eos_req), 1);
    EXPECT_EQ(e.tokens[0], (std::vector<std::int32_t>{kEos}));
    EXPECT_EQ(e.finish[0], FinishReason::stop);
    EXPECT_TRUE(std::holds_alternative<std::monostate>(e.stop_reason[0]));
    EXPECT_EQ(e.text[0], "");
    eos_req.params.min_tokens = 3;
    e = collect(*engine.submit(eos_req), 1);
    ASSERT_EQ(e.tokens[0].size(), 4u);
    EXPECT_EQ(e.tokens[0][3], kEos);
    eos_req.params.min_tokens = 0;
    eos_req.params.ignore_eos = true;
    e = collect(*engine.submit(eos_req), 1);
    EXPECT_EQ(e.tokens[0].size(), 20u);
    EXPECT_EQ(e.finish[0], FinishReason::length);
}

TEST(Engine, LogprobsAreReportedPerToken) {
    FakeModel model(kVocab, 64, 256, 16);
    Engine engine(base_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(30, 5);
    req.params = sampled(3, 12);
    req.params.logprobs = 3;
    const Collected c = collect(*engine.submit(req), 1);
    ASSERT_EQ(c.logprobs[0].size(), c.tokens[0].size());
    std::vector<std::int32_t> tokens = req.prompt;
    for (std::size_t i = 0; i < c.tokens[0].size(); ++i) {
        const auto logits = model.reference_logits(tokens);
        double z = 0;
        for (float v : logits) z += std::exp(static_cast<double>(v));
        const SampledToken& lp = c.logprobs[0][i];
        EXPECT_EQ(lp.token, c.tokens[0][i]);
        EXPECT_NEAR(lp.logprob, logits[lp.token] - std::log(z), 1e-4);
        ASSERT_EQ(lp.top_logprobs.size(), 3u);
        EXPECT_GE(lp.top_logprobs[0].logprob, lp.top_logprobs[1].logprob);
        tokens.push_back(c.tokens[0][i]);
    }
}

TEST(Engine, ParallelSamplesShareThePromptAndDiffer) {
    FakeModel model(kVocab, 64, 256, 16);
    auto cfg = base_config();
    cfg.scheduler.enable_prefix_caching = false;  // sharing must not depend on the cache
    Engine engine(cfg, model);
    GenerateRequest req;
    req.prompt = prompt_of(70, 6);
    req.params = sampled(99, 16);
    req.n = 3;
    const std::int64_t before = model.num_tokens_processed;
    const Collected c = collect(*engine.submit(req), 3);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.tokens[i], reference(model, req.prompt, req.params, 99, i, 256));
    EXPECT_NE(c.tokens[0], c.tokens[1]);
    EXPECT_EQ(c.usage->completion_tokens,
              static_cast<int>(c.tokens[0].size() + c.tokens[1].size() + c.tokens[2].size()));
    // The prompt's 4 full blocks (64 tokens) were computed once; each sibling recomputed only the 6-token tail.
    const std::int64_t prompt_work = model.num_tokens_processed - before;
    std::int64_t decode_work = 0;
    for (int i = 0; i < 3; ++i) decode_work += static_cast<std::int64_t>(c.tokens[i].size()) - 1;
    EXPECT_EQ(prompt_work - decode_work, 70 + 2 * 6);
}

TEST(Engine, LargeVocabularySamplesInParallelWithTheSameResults) {
    // A vocabulary above the threshold from which sequences are sampled on several threads.
    const int vocab = 16384;
    const int saved_threads = num_threads();
    set_num_threads(4);
    FakeModel model(vocab, 256, 256, 16);
    auto cfg = base_config();
    cfg.scheduler.max_num_seqs = 40;
    cfg.scheduler.max_num_batched_tokens = 2048;
    Engine engine(cfg, model);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < 40; ++i) {
        GenerateRequest req;
        req.prompt = prompt_of(8 + i, i);
        req.params = sampled(500 + i, 4);
        req.params.top_p = 0.9f;
        req.params.logprobs = 2;
        reqs.push_back(req);
        handles.push_back(engine.submit(req));
    }
    for (int i = 0; i < 40; ++i) {
        const Collected c = collect(*handles[i], 1);
        EXPECT_EQ(c.tokens[0], reference(model, reqs[i].prompt, reqs[i].params, 500 + i, 0, 256));
        EXPECT_EQ(c.logprobs[0].size(), c.tokens[0].size());
    }
    set_num_threads(saved_threads);
}

TEST(Engine, SameSeedSameOutputWhateverTheBatch) {
    FakeModel model(kVocab, 128, 256, 16);
    Engine engine(base_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(33, 7);
    req.params = sampled(2024, 25);
    const Collected alone = collect(*engine.submit(req), 1);
    std::vector<std::shared_ptr<RequestHandle>> crowd;
    for (int i = 0; i < 10; ++i) {
        GenerateRequest other;
        other.prompt = prompt_of(20 + i * 7, 100 + i);
        other.params = sampled(i, 30);
        crowd.push_back(engine.submit(other));
    }
    const Collected crowded = collect(*engine.submit(req), 1);
    for (auto& h : crowd) collect(*h, 1);
    EXPECT_EQ(alone.tokens[0], crowded.tokens[0]);
    // Unseeded requests get different random seeds.
    req.params.seed.reset();
    EXPECT_NE(collect(*engine.submit(req), 1).tokens[0], collect(*engine.submit(req), 1).tokens[0]);
}

template <typename Fn>
RequestError expect_rejection(Fn&& fn) {
    try {
        fn();
    } catch (const RequestError& e) {
        return e;
    }
    ADD_FAILURE() << "no RequestError";
    return RequestError(RequestErrorKind::invalid_request, "", "");
}

TEST(Engine, RejectsInvalidRequestsWithTheFieldAndOverflowWithTheApiMessage) {
    FakeModel model(kVocab, 64, 256, 16);
    Engine engine(base_config(), model);
    GenerateRequest req;
    auto e = expect_rejection([&] { engine.submit(req); });
    EXPECT_EQ(e.param(), "prompt");
    req.prompt = {1, 2, kVocab};
    EXPECT_EQ(expect_rejection([&] { engine.submit(req); }).param(), "prompt");
    req.prompt = prompt_of(10, 1);
    req.n = 0;
    EXPECT_EQ(expect_rejection([&] { engine.submit(req); }).param(), "n");
    req.n = 1;
    req.params.stop = {"x"};  // no tokenizer text
    EXPECT_EQ(expect_rejection([&] { engine.submit(req); }).param(), "stop");
    req.params = SamplingParams();
    req.params.top_p = 2.0f;
    EXPECT_EQ(expect_rejection([&] { engine.submit(req); }).param(), "top_p");

    req.params = SamplingParams();
    req.prompt = prompt_of(200, 1);
    req.params.max_tokens = 100;
    e = expect_rejection([&] { engine.submit(req); });
    EXPECT_EQ(e.kind(), RequestErrorKind::context_overflow);
    EXPECT_EQ(e.param(), "max_tokens");
    EXPECT_STREQ(e.what(),
                 "This model's maximum context length is 256 tokens. However, you requested 300 tokens (200 in the "
                 "messages, 100 in the completion). Please reduce the length of the messages or completion.");
    req.prompt = prompt_of(256, 1);
    req.params.max_tokens.reset();
    e = expect_rejection([&] { engine.submit(req); });
    EXPECT_EQ(e.kind(), RequestErrorKind::context_overflow);
    EXPECT_EQ(e.param(), "messages");
    // Without max_tokens a request may use what max_model_len leaves.
    req.prompt = prompt_of(250, 1);
    req.params.ignore_eos = true;
    const Collected c = collect(*engine.submit(req), 1);
    EXPECT_EQ(c.tokens[0].size(), 6u);
    EXPECT_EQ(c.finish[0], FinishReason::length);
}

// One running sequence at a time and room for three waiting requests: with the model gated, tests fill the queue.
EngineConfig small_queue_config() {
    auto cfg = base_config();
    cfg.max_waiting_requests = 3;
    cfg.scheduler.max_num_seqs = 1;
    return cfg;
}

TEST(Engine, BoundedQueueRejectsWhenFull) {
    FakeModel inner(kVocab, 64, 256, 16);
    GatedModel model(inner);
    Engine engine(small_queue_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(10, 1);
    req.params = sampled(1, 4);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    handles.push_back(engine.submit(req));
    model.wait_entered(1);  // the first request is running (and frozen in its first step)
    for (int i = 0; i < 3; ++i) handles.push_back(engine.submit(req));
    const auto e = expect_rejection([&] { engine.submit(req); });
    EXPECT_EQ(e.kind(), RequestErrorKind::queue_full);
    EXPECT_EQ(engine.stats().num_rejected, 1);
    EXPECT_EQ(engine.stats().num_waiting, 3);
    model.open();
    for (auto& h : handles) EXPECT_TRUE(collect(*h, 1).error.empty());
    handles.clear();
    EXPECT_NO_THROW(handles.push_back(engine.submit(req)));  // room again
    collect(*handles.back(), 1);
}

// A batch is all or nothing: one bad request or too little queue room refuses every request in it, and an
// accepted batch generates what each request would generate alone.
TEST(Engine, SubmitBatchIsAllOrNothing) {
    FakeModel inner(kVocab, 64, 256, 16);
    GatedModel model(inner);
    Engine engine(small_queue_config(), model);
    GenerateRequest good;
    good.prompt = prompt_of(10, 1);
    good.params = sampled(1, 4);
    GenerateRequest bad = good;
    bad.params.top_p = 2.0f;
    EXPECT_EQ(expect_rejection([&] { engine.submit_batch({good, bad}); }).param(), "top_p");
    EXPECT_EQ(engine.stats().num_waiting, 0);

    auto first = engine.submit(good);
    model.wait_entered(1);  // running and frozen: the queue holds what comes next
    const auto e = expect_rejection([&] { engine.submit_batch({good, good, good, good}); });
    EXPECT_EQ(e.kind(), RequestErrorKind::queue_full);
    EXPECT_EQ(engine.stats().num_waiting, 0);
    std::vector<GenerateRequest> batch;
    for (int i = 0; i < 3; ++i) {
        GenerateRequest r = good;
        r.prompt = prompt_of(8 + i, i);
        r.params = sampled(10 + i, 5);
        batch.push_back(r);
    }
    auto handles = engine.submit_batch(batch);
    ASSERT_EQ(handles.size(), 3u);
    EXPECT_EQ(engine.stats().num_waiting, 3);
    model.open();
    EXPECT_TRUE(collect(*first, 1).error.empty());
    for (std::size_t i = 0; i < handles.size(); ++i) {
        const Collected c = collect(*handles[i], 1);
        EXPECT_EQ(c.tokens[0], reference(inner, batch[i].prompt, batch[i].params, 10 + i, 0, 256));
    }
}

TEST(Engine, CancelMidPrefillFreesPagesAndEndsTheStream) {
    FakeModel inner(kVocab, 64, 512, 16);
    GatedModel model(inner);
    auto cfg = base_config();
    cfg.scheduler.max_num_batched_tokens = 32;
    Engine engine(cfg, model);
    GenerateRequest req;
    req.prompt = prompt_of(400, 9);  // 13 chunks of 32
    req.params = sampled(1, 10);
    auto h = engine.submit(req);
    model.allow(3);
    model.wait_entered(4);  // three chunks done, the fourth is in forward()
    EXPECT_GT(engine.stats().kv_cache_usage, 0.0);
    h->cancel();
    model.open();
    const Collected c = collect(*h, 1);
    EXPECT_EQ(c.finish[0], FinishReason::abort);
    EXPECT_TRUE(c.error.empty()) << c.error;
    EXPECT_TRUE(c.tokens[0].empty());
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.kv_cache_usage, 0.0);
    EXPECT_EQ(s.num_running + s.num_waiting, 0);
    EXPECT_EQ(s.finished[static_cast<int>(FinishReason::abort)], 1);
    EXPECT_FALSE(engine.cancel(h->id()));  // no longer live
}

TEST(Engine, CancelDuringDecodeKeepsWhatWasStreamed) {
    FakeModel inner(kVocab, 64, 512, 16);
    GatedModel model(inner);
    Engine engine(base_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(20, 9);
    req.params = sampled(8, 100);
    req.params.ignore_eos = true;
    auto h = engine.submit(req);
    model.allow(6);
    model.wait_entered(7);
    EXPECT_TRUE(engine.cancel(h->id()));
    model.open();
    const Collected c = collect(*h, 1);
    EXPECT_EQ(c.finish[0], FinishReason::abort);
    EXPECT_TRUE(c.error.empty()) << c.error;
    const auto full = reference(inner, req.prompt, req.params, 8, 0, 512);
    ASSERT_GE(c.tokens[0].size(), 6u);
    ASSERT_LT(c.tokens[0].size(), 100u);
    EXPECT_TRUE(std::equal(c.tokens[0].begin(), c.tokens[0].end(), full.begin()));
}

TEST(Engine, AModelFailureFailsThatBatchAndTheEngineCarriesOn) {
    FakeModel model(kVocab, 64, 256, 16);
    model.fail_on_token = kVocab - 1;
    Engine engine(base_config(), model);
    GenerateRequest bad;
    bad.prompt = {1, 2, kVocab - 1};
    bad.params = sampled(1, 5);
    const Collected c = collect(*engine.submit(bad), 1);
    EXPECT_EQ(c.finish[0], FinishReason::error);
    EXPECT_NE(c.error.find("injected failure"), std::string::npos);
    GenerateRequest good;
    good.prompt = prompt_of(10, 1);
    good.params = sampled(1, 5);
    good.params.logit_bias = {{kVocab - 1, -100.0f}};
    EXPECT_TRUE(collect(*engine.submit(good), 1).error.empty());
    EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
}

TEST(Engine, ShutdownFinishesWithinTheGraceAndThenRefuses) {
    FakeModel model(kVocab, 64, 512, 16);
    auto engine = std::make_unique<Engine>(base_config(), model);
    GenerateRequest req;
    req.prompt = prompt_of(20, 1);
    req.params = sampled(1, 8);
    auto h = engine->submit(req);
    engine->shutdown(std::chrono::seconds(30));
    const Collected c = collect(*h, 1);
    EXPECT_NE(c.finish[0], FinishReason::abort);
    EXPECT_EQ(expect_rejection([&] { engine->submit(req); }).kind(), RequestErrorKind::shutting_down);
    h->cancel();  // harmless after shutdown
    engine.reset();
    h->cancel();  // and after the engine is gone

    // No grace: in-flight requests are aborted, and their streams end.
    FakeModel inner(kVocab, 64, 512, 16);
    GatedModel gated(inner);
    auto engine2 = std::make_unique<Engine>(base_config(), gated);
    req.params.max_tokens = 400;
    req.params.ignore_eos = true;
    auto h2 = engine2->submit(req);
    gated.allow(2);
    gated.wait_entered(3);
    std::thread stopper([&] { engine2->shutdown(); });
    // Let the frozen step finish only once the shutdown is under way (submit refuses from then on). The probes
    // may fill the waiting queue before the stopper thread gets a core: queue_full only means "not yet".
    std::vector<std::shared_ptr<RequestHandle>> probes;
    RequestErrorKind refusal = RequestErrorKind::queue_full;
    while (refusal == RequestErrorKind::queue_full) {
        try {
            probes.push_back(engine2->submit(req));
        } catch (const RequestError& e) {
            refusal = e.kind();
        }
        std::this_thread::yield();
    }
    gated.open();
    stopper.join();
    EXPECT_EQ(refusal, RequestErrorKind::shutting_down);
    EXPECT_EQ(collect(*h2, 1).finish[0], FinishReason::abort);
    for (auto& p : probes) EXPECT_EQ(collect(*p, 1).finish[0], FinishReason::abort);
}

TEST(Engine, CallbacksReceiveEventsOnTheEngineThread) {
    FakeModel model(kVocab, 64, 256, 16);
    Engine engine(base_config(), model);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::int32_t> tokens;
    bool done = false;
    std::thread::id callback_thread;
    GenerateRequest req;
    req.prompt = prompt_of(12, 1);
    req.params = sampled(4, 9);
    auto h = engine.submit(req, [&](RequestEvent&& ev) {
        std::lock_guard lock(mu);
        callback_thread = std::this_thread::get_id();
        for (auto& d : ev.samples) tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
        if (ev.finished) done = true;
        cv.notify_all();
    });
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    EXPECT_EQ(tokens, reference(model, req.prompt, req.params, 4, 0, 256));
    EXPECT_NE(callback_thread, std::this_thread::get_id());
    EXPECT_FALSE(h->next().has_value());  // callback mode: no queue
}

// A drafter that knows the fake model: proposes its greedy continuation, optionally corrupted.
class FakeDrafter : public Drafter {
public:
    FakeDrafter(const FakeModel& model, double corrupt, bool probabilistic)
        : model_(model), corrupt_(corrupt), probabilistic_(probabilistic) {}
    void propose(std::uint64_t request_id, std::int32_t index, std::span<const std::int32_t> tokens,
                 std::int32_t max_drafts, std::vector<std::int32_t>& drafts, std::vector<float>& probs,
                 const DraftSampling& = {}) override {
        std::vector<std::int32_t> t(tokens.begin(), tokens.end());
        RequestRng rng(request_id * 131 + index, t.size());
        for (int i = 0; i < max_drafts; ++i) {
            auto logits = model_.reference_logits(t);
            std::int32_t d = argmax(logits);
            if (rng.uniform(i) < corrupt_) d = static_cast<std::int32_t>(rng.uniform(i, 1) * kVocab);
            if (probabilistic_) {
                // q: a flattened softmax of the model's logits; the draft is drawn from it.
                std::vector<float> q(kVocab);
                double z = 0;
                for (int v = 0; v < kVocab; ++v) z += q[v] = static_cast<float>(std::exp(logits[v] * 0.5));
                for (float& v : q) v = static_cast<float>(v / z);
                d = Sampler::draw(q, rng.uniform(i, 2));
                probs.insert(probs.end(), q.begin(), q.end());
            }
            drafts.push_back(d);
            t.push_back(d);
        }
        ++calls;
    }
    std::atomic<int> calls{0};

private:
    const FakeModel& model_;
    double corrupt_;
    bool probabilistic_;
};

TEST(Engine, SpeculativeDecodingIsLosslessForGreedyRequests) {
    for (double corrupt : {0.0, 0.5}) {
        FakeModel model(kVocab, 64, 256, 16);
        FakeDrafter drafter(model, corrupt, false);
        auto cfg = base_config();
        cfg.num_speculative_tokens = 3;
        Engine engine(cfg, model, nullptr, &drafter);
        std::vector<std::shared_ptr<RequestHandle>> handles;
        std::vector<GenerateRequest> reqs;
        for (int i = 0; i < 6; ++i) {
            GenerateRequest req;
            req.prompt = prompt_of(15 + 9 * i, i);
            req.params.temperature = 0.0f;
            req.params.max_tokens = 20 + i;
            req.params.logprobs = 1;
            reqs.push_back(req);
            handles.push_back(engine.submit(req));
        }
        for (int i = 0; i < 6; ++i) {
            const Collected c = collect(*handles[i], 1);
            EXPECT_EQ(c.tokens[0], reference(model, reqs[i].prompt, reqs[i].params, 0, 0, 256)) << corrupt;
            EXPECT_EQ(c.logprobs[0].size(), c.tokens[0].size());
        }
        const EngineStats s = engine.stats();
        EXPECT_GT(s.spec_num_drafts, 0);
        EXPECT_GT(drafter.calls.load(), 0);
        if (corrupt == 0.0) {
            EXPECT_EQ(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);  // a perfect drafter
        } else {
            EXPECT_LT(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
        }
        std::int64_t per_pos = 0;
        for (auto v : s.spec_accepted_per_position) per_pos += v;
        EXPECT_EQ(per_pos, s.spec_num_accepted_tokens);
    }
}

TEST(Engine, AFailingDrafterOnlyCostsSpeed) {
    class ThrowingDrafter : public Drafter {
    public:
        void propose(std::uint64_t, std::int32_t, std::span<const std::int32_t>, std::int32_t,
                     std::vector<std::int32_t>& drafts, std::vector<float>&, const DraftSampling&) override {
            drafts.push_back(1);
            throw Error("drafter out of order");
        }
    } drafter;
    FakeModel model(kVocab, 64, 256, 16);
    auto cfg = base_config();
    cfg.num_speculative_tokens = 2;
    Engine engine(cfg, model, nullptr, &drafter);
    GenerateRequest req;
    req.prompt = prompt_of(20, 3);
    req.params = sampled(6, 12);
    const Collected c = collect(*engine.submit(req), 1);
    EXPECT_TRUE(c.error.empty());
    EXPECT_EQ(c.tokens[0], reference(model, req.prompt, req.params, 6, 0, 256));
    EXPECT_EQ(engine.stats().spec_num_drafts, 0);
}

TEST(Engine, SpeculativeSamplingKeepsEveryInvariantUnderPressure) {
    FakeModel model(kVocab, 20, 160, 16);  // a small pool: preemption with drafts in flight
    FakeDrafter drafter(model, 0.3, true);
    auto cfg = base_config();
    cfg.num_speculative_tokens = 4;
    cfg.scheduler.max_num_batched_tokens = 48;
    Engine engine(cfg, model, nullptr, &drafter);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 12; ++i) {
        GenerateRequest req;
        req.prompt = prompt_of(10 + 7 * i, i);
        req.params = sampled(i, 30);
        req.params.ignore_eos = true;
        req.params.top_k = 3;
        prompts.push_back(req.prompt);
        handles.push_back(engine.submit(req));
    }
    std::int64_t generated = 0;
    for (std::size_t r = 0; r < handles.size(); ++r) {
        const Collected c = collect(*handles[r], 1);
        EXPECT_TRUE(c.error.empty()) << c.error;
        EXPECT_EQ(c.tokens[0].size(), 30u);
        generated += static_cast<std::int64_t>(c.tokens[0].size());
        // Whatever the drafter proposed, every emitted token is one the target distribution allows: one of the
        // top 3 of the model's logits after the tokens before it.
        std::vector<std::int32_t> tokens = prompts[r];
        for (std::int32_t t : c.tokens[0]) {
            const auto logits = model.reference_logits(tokens);
            int better = 0;
            for (int v = 0; v < kVocab; ++v) better += logits[v] > logits[t] || (logits[v] == logits[t] && v < t);
            ASSERT_LT(better, 3) << "request " << r;
            tokens.push_back(t);
        }
    }
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.generation_tokens, generated);
    EXPECT_GT(s.spec_num_accepted_tokens, 0);
    EXPECT_EQ(s.kv_cache_usage, 0.0);
}

// A drafter that conditions on hidden-state taps: it checks that every row the engine hands it is the fake
// model's tap of the right layer, position and token, and that at each proposal every position of the context it
// was shown holds the token the sequence really has there (rejected drafts and preempted work replaced).
class TapCheckingDrafter : public FakeDrafter {
public:
    using FakeDrafter::FakeDrafter;
    std::vector<int> tap_layers() const override { return {4, 1}; }
    void observe(std::uint64_t request_id, std::int32_t index, std::int32_t first_position,
                 std::span<const std::int32_t> tokens, std::span<const float> taps) override {
        constexpr std::size_t h = FakeModel::kTapHidden;
        if (taps.size() != tokens.size() * 2 * h) {
            ++bad_rows;
            return;
        }
        auto& seen = context_[{request_id, index}];
        for (std::size_t t = 0; t < tokens.size(); ++t) {
            const std::int32_t pos = first_position + static_cast<std::int32_t>(t);
            const float* row = taps.data() + t * 2 * h;
            const bool ok = row[0] == 4.0f && row[h] == 1.0f && row[1] == static_cast<float>(pos) &&
                            row[h + 1] == static_cast<float>(pos) && row[2] == static_cast<float>(tokens[t]) &&
                            row[h + 2] == static_cast<float>(tokens[t]);
            bad_rows += !ok;
            if (seen.size() <= static_cast<std::size_t>(pos)) seen.resize(pos + 1, -1);
            seen[pos] = tokens[t];
        }
        ++observed;
    }
    void release(std::uint64_t request_id) override {
        std::erase_if(context_, [&](const auto& kv) { return kv.first.first == request_id; });
        ++released;
    }
    void propose(std::uint64_t request_id, std::int32_t index, std::span<const std::int32_t> tokens,
                 std::int32_t max_drafts, std::vector<std::int32_t>& drafts, std::vector<float>& probs,
                 const DraftSampling& sampling) override {
        const auto& seen = context_[{request_id, index}];
        for (std::size_t p = 0; p + 1 < tokens.size(); ++p) {
            const bool observed_here = p < seen.size() && seen[p] >= 0;
            if (observed_here ? seen[p] != tokens[p] : require_every_position) ++bad_context;
        }
        FakeDrafter::propose(request_id, index, tokens, max_drafts, drafts, probs, sampling);
    }
    bool require_every_position = true;
    int bad_rows = 0, bad_context = 0, observed = 0, released = 0;
    std::size_t live() const { return context_.size(); }

private:
    std::map<std::pair<std::uint64_t, std::int32_t>, std::vector<std::int32_t>> context_;
};

// The engine asks the model for the drafter's taps and hands each sequence its rows after every step: prefill
// chunks, verify steps with rejected drafts, recompute after preemption, n > 1 samples sharing the prompt.
TEST(Engine, DrafterSeesTheHiddenStatesOfEveryComputedToken) {
    for (bool forked : {false, true}) {
        FakeModel model(kVocab, 20, 160, 16);  // a small pool: preemption with drafts in flight
        TapCheckingDrafter drafter(model, 0.4, false);
        drafter.require_every_position = !forked;  // forked samples share prompt pages they never computed
        auto cfg = base_config();
        cfg.num_speculative_tokens = 3;
        cfg.scheduler.max_num_batched_tokens = 40;
        cfg.scheduler.enable_prefix_caching = false;
        Engine engine(cfg, model, nullptr, &drafter);
        std::vector<GenerateRequest> reqs;
        for (int i = 0; i < 8; ++i) {
            GenerateRequest req;
            req.prompt = prompt_of(12 + 9 * i, i);
            req.params.temperature = 0.0f;  // greedy: with drafts the output must equal the reference exactly
            req.params.max_tokens = 24;
            req.params.ignore_eos = true;
            req.n = forked ? 2 : 1;
            reqs.push_back(req);
        }
        auto handles = engine.submit_batch(reqs);
        for (std::size_t i = 0; i < handles.size(); ++i) {
            const Collected c = collect(*handles[i], reqs[i].n);
            EXPECT_TRUE(c.error.empty()) << c.error;
            for (int k = 0; k < reqs[i].n; ++k) {
                EXPECT_EQ(c.tokens[k], reference(model, reqs[i].prompt, reqs[i].params, 0, k, 160));
            }
        }
        engine.shutdown();
        EXPECT_EQ(drafter.bad_rows, 0);
        EXPECT_EQ(drafter.bad_context, 0);
        EXPECT_GT(drafter.observed, 0);
        EXPECT_GT(drafter.calls.load(), 0);
        EXPECT_EQ(drafter.released, 8);
        EXPECT_EQ(drafter.live(), 0u);
        const EngineStats s = engine.stats();
        EXPECT_GT(s.spec_num_accepted_tokens, 0);
        if (!forked) {
            EXPECT_GT(s.num_preemptions, 0);
        }
    }
}

// Many threads submit and cancel at once over a tiny page pool: every step's invariants are checked by the
// engine (a violation would fail the requests), every page write is checked to be private, and every completed
// output equals the reference, with and without prefix caching.
TEST(Engine, ConcurrentStressMatchesTheReference) {
    for (bool caching : {true, false}) {
        FakeModel model(kVocab, 14, 192, 16);
        auto cfg = base_config();
        cfg.scheduler.enable_prefix_caching = caching;
        cfg.scheduler.max_num_batched_tokens = 48;
        cfg.scheduler.max_num_seqs = 6;
        cfg.max_waiting_requests = 1000;
        Engine engine(cfg, model);
        std::atomic<int> bad_writes{0};
        model.on_write = [&](PageId p) {
            const BlockManager& bm = engine.block_manager_on_engine_thread();
            if (bm.ref_count(p) != 1 || bm.is_registered(p)) ++bad_writes;
        };
        struct Job {
            GenerateRequest req;
            bool cancel;
            Collected result;
        };
        const int kThreads = 4, kPerThread = 12;
        std::vector<std::vector<Job>> jobs(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            for (int i = 0; i < kPerThread; ++i) {
                Job j;
                RequestRng r(t * 100 + i, 5);
                const std::vector<std::int32_t> shared_prefix = prompt_of(40, t % 2);
                j.req.prompt = shared_prefix;
                const int extra = 1 + static_cast<int>(r.uniform(0) * 50);
                for (int k = 0; k < extra; ++k) j.req.prompt.push_back(2 + static_cast<int>(r.uniform(k + 1) * 60));
                j.req.params = sampled(t * 100 + i, 5 + static_cast<int>(r.uniform(99) * 30));
                j.req.params.temperature = r.uniform(98) < 0.3 ? 0.0f : 0.9f;
                j.req.n = r.uniform(97) < 0.2 ? 2 : 1;
                j.cancel = r.uniform(96) < 0.15;
                jobs[t].push_back(std::move(j));
            }
        }
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                // Everything in flight at once (the pool is far too small for it), some cancelled on the way.
                std::vector<std::shared_ptr<RequestHandle>> handles;
                for (Job& j : jobs[t]) handles.push_back(engine.submit(j.req));
                for (std::size_t i = 0; i < handles.size(); ++i) {
                    if (jobs[t][i].cancel) {
                        handles[i]->wait_for(std::chrono::milliseconds(1));
                        handles[i]->cancel();
                    }
                }
                for (std::size_t i = 0; i < handles.size(); ++i)
                    jobs[t][i].result = collect(*handles[i], jobs[t][i].req.n);
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(bad_writes.load(), 0);
        std::int64_t generated = 0;
        for (auto& per_thread : jobs) {
            for (Job& j : per_thread) {
                EXPECT_TRUE(j.result.error.empty()) << j.result.error;
                for (int k = 0; k < j.req.n; ++k) {
                    const auto expected = reference(model, j.req.prompt, j.req.params, *j.req.params.seed, k, 192);
                    const auto& got = j.result.tokens[k];
                    generated += static_cast<std::int64_t>(got.size());
                    if (j.result.finish[k] == FinishReason::abort) {
                        ASSERT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
                    } else {
                        ASSERT_EQ(got, expected) << "caching " << caching;
                    }
                }
            }
        }
        const EngineStats s = engine.stats();
        EXPECT_EQ(s.generation_tokens, generated);
        EXPECT_EQ(s.kv_cache_usage, 0.0);
        EXPECT_EQ(s.num_running + s.num_waiting, 0);
        EXPECT_GT(s.num_preemptions, 0);
        if (caching) {
            EXPECT_GT(s.prefix_cache_hits, 0);
        }
        std::int64_t finished = 0;
        for (auto f : s.finished) finished += f;
        std::int64_t sequences = 0;
        for (auto& per_thread : jobs) {
            for (Job& j : per_thread) sequences += j.req.n;
        }
        EXPECT_EQ(finished, sequences);
        std::int64_t requests = 0, with_tokens = 0;
        for (auto& per_thread : jobs) {
            for (Job& j : per_thread) {
                ++requests;
                with_tokens += j.result.usage->completion_tokens > 0;
            }
        }
        EXPECT_EQ(s.e2e_latency.count(), requests);
        EXPECT_EQ(s.ttft.count(), with_tokens);
    }
}

}  // namespace
}  // namespace msa
