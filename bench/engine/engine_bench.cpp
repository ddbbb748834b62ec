// Scheduler and engine overhead per step at 256 concurrent sequences (the fake model's forward costs ~0 and is
// timed and subtracted), sampling cost per token at MiniMax-M3's vocabulary (200064), and the prefix-cache hash
// cost per 128-token block, and the engine over the real CPU model (a tiny random checkpoint) against the model's
// own single-sequence loop, and speculative decoding with the default model's DSpark drafter against plain
// decoding (--only spec; --model DIR, --prompts FILE). Writes JSON figures (contributing.md: figure, value, unit,
// date, machine, commit).
//
//   build/bench/engine/engine_bench --out bench/results/engine_$(date +%F).json
//   build/bench/engine/engine_bench --only spec --out bench/results/spec_decode_$(date +%F).json
#include "core/parallel.h"
#include "engine/block_hash.h"
#include "core/error.h"
#include "engine/cpu_model_executor.h"
#include "engine/dspark_drafter.h"
#include "engine/engine.h"
#include "engine/fake_model.h"
#include "engine/model_bundle.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/minimax_m3_model.h"
#include "model/random_checkpoint.h"
#include "support/test_configs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bench_host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <time.h>
#include <unistd.h>

namespace {

using msa::bench::process_cpu_us;
using msa::bench::run_command;
using msa::bench::thread_cpu_us;

using Clock = std::chrono::steady_clock;
using msa::testing::FakeModel;

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::vector<std::int32_t> prompt_tokens(int n, int salt, int vocab) {
    std::vector<std::int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 1 + (i * 7 + salt * 131) % (vocab - 1);
    return t;
}

// 256 sequences in steady decode: per-step cost of schedule() + complete_step() + append_token() (no model).
double scheduler_decode_step_us(int concurrency, int prompt_len, bool caching) {
    msa::SchedulerConfig cfg;
    cfg.page_size = 128;
    cfg.max_num_seqs = concurrency;
    cfg.max_num_batched_tokens = 16384;
    cfg.max_model_len = 4096;
    cfg.num_pages = concurrency * (4096 / 128) + 64;
    cfg.enable_prefix_caching = caching;
    msa::Scheduler s(cfg);
    std::vector<std::unique_ptr<msa::Sequence>> seqs;
    for (int i = 0; i < concurrency; ++i) {
        auto q = std::make_unique<msa::Sequence>();
        q->request_id = q->arrival = i + 1;
        q->tokens = prompt_tokens(prompt_len, i, 1000);
        q->num_prompt = prompt_len;
        s.add(q.get());
        seqs.push_back(std::move(q));
    }
    // Prefill everything first.
    while (true) {
        auto step = s.schedule();
        s.complete_step(step);
        bool all_decoding = true;
        for (auto& x : step.seqs) {
            if (x.num_logits > 0) s.append_token(*x.seq, 7);
        }
        for (auto& q : seqs) all_decoding &= q->status == msa::SequenceStatus::running && q->prefill_done();
        if (all_decoding) break;
    }
    std::vector<double> samples;
    for (int rep = 0; rep < 7; ++rep) {
        const int steps = 300;
        const double t0 = thread_cpu_us();
        for (int i = 0; i < steps; ++i) {
            auto step = s.schedule();
            s.complete_step(step);
            for (auto& x : step.seqs) s.append_token(*x.seq, 3 + (i & 63));
        }
        samples.push_back((thread_cpu_us() - t0) / steps);
    }
    return median(samples);
}

// A model wrapper that accumulates the time spent in forward() so that it can be subtracted.
class TimedModel : public msa::ModelExecutor {
public:
    explicit TimedModel(msa::ModelExecutor& inner) : inner_(inner) {}
    void forward(const msa::ForwardBatch& b, const msa::ForwardOptions& o, msa::ForwardOutput& out) override {
        const double t0 = thread_cpu_us();
        inner_.forward(b, o, out);
        forward_us += thread_cpu_us() - t0;
    }
    std::int32_t vocab_size() const override { return inner_.vocab_size(); }
    std::int32_t num_kv_pages() const override { return inner_.num_kv_pages(); }
    std::int32_t page_size() const override { return inner_.page_size(); }
    std::int32_t max_model_len() const override { return inner_.max_model_len(); }
    double forward_us = 0;

private:
    msa::ModelExecutor& inner_;
};

struct EngineRun {
    double wall_step_us = 0, cpu_step_us = 0, overhead_us = 0, forward_us = 0;
    std::int64_t steps = 0, tokens = 0;
};

// The whole engine thread (schedule, forward, greedy sampling over `vocab`, stop checks, events to callbacks)
// with `concurrency` requests in flight, each replaced by a new one (sharing a 512-token system prompt) when it
// finishes, so that admission, prefill chunks and prefix-cache hits happen alongside decode.
EngineRun engine_steady_state(int concurrency, int vocab, int total_requests) {
    FakeModel inner(vocab, concurrency * 12 + 64, 2048, 128);
    inner.skip_logits = true;  // all-zero logits: greedy picks token 0, which is not EOS here
    TimedModel model(inner);
    msa::EngineConfig cfg;
    cfg.scheduler.max_num_seqs = concurrency;
    cfg.scheduler.max_num_batched_tokens = 8192;
    cfg.max_waiting_requests = total_requests;
    msa::Engine engine(cfg, model);
    std::atomic<int> done{0};
    std::mutex mu;
    std::condition_variable cv;
    const auto system_prompt = prompt_tokens(512, 0, vocab);
    auto make_request = [&](int i) {
        msa::GenerateRequest r;
        r.prompt = system_prompt;
        const auto user = prompt_tokens(64 + (i * 37) % 200, i + 1, vocab);
        r.prompt.insert(r.prompt.end(), user.begin(), user.end());
        r.params.temperature = 0.0f;
        r.params.max_tokens = 64 + (i * 53) % 192;
        return r;
    };
    std::vector<std::shared_ptr<msa::RequestHandle>> handles;
    std::function<void(msa::RequestEvent &&)> on_event = [&](msa::RequestEvent&& ev) {
        if (!ev.finished) return;
        {
            std::lock_guard lock(mu);  // no lost wake-up between the waiter's check and its sleep
            ++done;
        }
        cv.notify_all();
    };
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_us();
    const auto stats0 = engine.stats();
    // Keep `concurrency` requests in flight from this thread.
    int next = 0;
    for (; next < concurrency; ++next) handles.push_back(engine.submit(make_request(next), on_event));
    while (next < total_requests) {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return next - done.load() < concurrency; });
        lock.unlock();
        while (next < total_requests && next - done.load() < concurrency) {
            handles.push_back(engine.submit(make_request(next++), on_event));
        }
    }
    {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return done.load() == total_requests; });
    }
    const double wall_us = us_since(t0);
    const double process_us = process_cpu_us() - cpu0;
    const auto stats = engine.stats();
    engine.shutdown();
    EngineRun r;
    r.steps = stats.num_steps - stats0.num_steps;
    r.tokens = stats.generation_tokens;
    r.wall_step_us = wall_us / static_cast<double>(r.steps);
    r.cpu_step_us = process_us / static_cast<double>(r.steps);
    r.forward_us = model.forward_us / static_cast<double>(r.steps);
    r.overhead_us = r.cpu_step_us - r.forward_us;
    return r;
}

// The engine over the real CPU model (a tiny random MiniMax-M3 checkpoint: 3 layers, hidden 128, MSA and MoE
// layers, NVFP4 KV) against the model's own single-sequence greedy loop, on one thread so that CPU time is exact:
// `requests` requests of `prompt_len` + `new_tokens` tokens, one after another directly, all at once through the
// engine. Returns {direct us/token, engine us/token, engine us/step outside forward(), steps, same tokens}.
struct CpuModelRun {
    double direct_us_per_token = 0, engine_us_per_token = 0, engine_overhead_us_per_step = 0;
    double engine_forward_us_per_step = 0;
    std::int64_t steps = 0;
    bool same_tokens = false;
};

CpuModelRun cpu_model_engine_vs_direct(int requests, int prompt_len, int new_tokens) {
    namespace fs = std::filesystem;
    msa::set_num_threads(1);
    const fs::path dir = fs::temp_directory_path() / fmt::format("msa_engine_bench_model_{}", ::getpid());
    msa::test::TinyConfig tc;
    tc.vocab = 2048;
    msa::RandomCheckpointSpec spec;
    spec.config_json = msa::test::tiny_config_json(tc);
    msa::write_random_checkpoint(dir, spec);
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < requests; ++i) prompts.push_back(prompt_tokens(prompt_len, i + 1, tc.vocab));
    CpuModelRun r;

    // Direct: one sequence at a time on pages 0.., prefill then one token per step.
    std::vector<std::vector<std::int32_t>> direct_out;
    {
        msa::ModelOptions o;
        o.num_kv_pages = (prompt_len + new_tokens) / 128 + 1;
        auto model = msa::MiniMaxM3Model::load(dir.string(), o);
        std::vector<std::int32_t> pages(static_cast<std::size_t>(o.num_kv_pages));
        std::iota(pages.begin(), pages.end(), 0);
        const double t0 = thread_cpu_us();
        for (const auto& p : prompts) {
            std::vector<std::int32_t> seq = p, out;
            std::int32_t past = 0;
            msa::ForwardOutput fo;
            while (static_cast<int>(out.size()) < new_tokens) {
                msa::ForwardBatch b;
                msa::SequenceStep s;
                s.tokens = std::span<const std::int32_t>(seq.data() + past, seq.size() - past);
                s.past_len = past;
                s.pages = pages;
                s.num_logits = 1;
                b.seqs.push_back(s);
                model->forward(b, {}, fo);
                past = static_cast<std::int32_t>(seq.size());
                out.push_back(static_cast<std::int32_t>(std::max_element(fo.logits.begin(), fo.logits.end()) -
                                                        fo.logits.begin()));
                seq.push_back(out.back());
            }
            direct_out.push_back(out);
        }
        r.direct_us_per_token = (thread_cpu_us() - t0) / (requests * new_tokens);
    }

    // Engine: every request submitted at once.
    {
        msa::CpuModelExecutorOptions o;
        o.num_kv_pages = requests * ((prompt_len + new_tokens) / 128 + 1) + 8;
        o.threads = 1;
        auto inner = msa::load_cpu_model_executor(dir, o);
        TimedModel model(*inner);
        msa::EngineConfig cfg;
        cfg.scheduler.max_num_batched_tokens = 2048;
        msa::Engine engine(cfg, model);
        std::vector<std::shared_ptr<msa::RequestHandle>> handles;
        const double cpu0 = process_cpu_us();
        for (const auto& p : prompts) {
            msa::GenerateRequest req;
            req.prompt = p;
            req.params.temperature = 0.0f;
            req.params.ignore_eos = true;
            req.params.max_tokens = new_tokens;
            handles.push_back(engine.submit(std::move(req)));
        }
        std::vector<std::vector<std::int32_t>> engine_out;
        for (auto& h : handles) {
            std::vector<std::int32_t> out;
            while (auto ev = h->next())
                for (const auto& d : ev->samples) out.insert(out.end(), d.token_ids.begin(), d.token_ids.end());
            engine_out.push_back(out);
        }
        const double cpu_us = process_cpu_us() - cpu0;
        r.steps = engine.stats().num_steps;
        engine.shutdown();
        r.engine_us_per_token = cpu_us / (requests * new_tokens);
        r.engine_forward_us_per_step = model.forward_us / static_cast<double>(r.steps);
        r.engine_overhead_us_per_step = (cpu_us - model.forward_us) / static_cast<double>(r.steps);
        r.same_tokens = engine_out == direct_out;
    }
    fs::remove_all(dir);
    return r;
}

struct SamplingCase {
    const char* name;
    float temperature;
    float top_p;
    int top_k;
    std::optional<int> logprobs;
};

double sampling_us(int vocab, const SamplingCase& c) {
    msa::Sampler sampler(msa::SamplerConfig{vocab, {}, msa::LogprobsMode::raw});
    std::vector<float> logits(vocab);
    // Logits shaped like a language model's: a few strong candidates over a long Gaussian-ish tail.
    for (int i = 0; i < vocab; ++i) {
        const double u = msa::RequestRng(1, 0).uniform(i), v = msa::RequestRng(2, 0).uniform(i);
        logits[i] = static_cast<float>(2.0 * (u + v - 1.0) * 3.0);
    }
    for (int i = 0; i < 8; ++i) logits[(i * 7919) % vocab] = 12.0f - i;
    msa::SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.top_k = c.top_k;
    p.logprobs = c.logprobs;
    msa::TokenHistory history;
    msa::RequestRng rng(3, 0);
    std::vector<double> samples;
    for (int rep = 0; rep < 7; ++rep) {
        const int n = 40;
        const double t0 = thread_cpu_us();
        std::int64_t sink = 0;
        for (int i = 0; i < n; ++i) sink += sampler.sample(logits, p, history, rng, rep * n + i).token;
        samples.push_back((thread_cpu_us() - t0) / n);
        if (sink < 0) std::puts("");
    }
    return median(samples);
}

double block_hash_us() {
    const auto tokens = prompt_tokens(128 * 256, 3, 200064);
    std::vector<double> samples;
    for (int rep = 0; rep < 7; ++rep) {
        std::vector<msa::BlockHash> hashes;
        const double t0 = thread_cpu_us();
        msa::extend_block_hashes(tokens, 128, "", hashes);
        samples.push_back((thread_cpu_us() - t0) / static_cast<double>(hashes.size()));
    }
    return median(samples);
}

// Wraps a drafter and adds up the thread CPU time of its calls (they run on the engine thread).
class TimedDrafter : public msa::Drafter {
public:
    explicit TimedDrafter(msa::Drafter& inner) : inner_(inner) {}
    std::vector<int> tap_layers() const override { return inner_.tap_layers(); }
    void observe(std::uint64_t id, std::int32_t index, std::int32_t first, std::span<const std::int32_t> tokens,
                 std::span<const float> taps) override {
        const double t0 = thread_cpu_us();
        inner_.observe(id, index, first, tokens, taps);
        observe_us += thread_cpu_us() - t0;
    }
    void release(std::uint64_t id) override { inner_.release(id); }
    void propose(std::uint64_t id, std::int32_t index, std::span<const std::int32_t> tokens, std::int32_t max_drafts,
                 std::vector<std::int32_t>& drafts, std::vector<float>& probs,
                 const msa::DraftSampling& sampling) override {
        const double t0 = thread_cpu_us();
        inner_.propose(id, index, tokens, max_drafts, drafts, probs, greedy_drafts ? msa::DraftSampling{} : sampling);
        propose_us += thread_cpu_us() - t0;
        ++proposals;
    }
    double observe_us = 0, propose_us = 0;
    std::int64_t proposals = 0;
    bool greedy_drafts = false;  // draft greedily even for sampling requests

private:
    msa::Drafter& inner_;
};

struct SpecRun {
    std::vector<std::vector<std::int32_t>> tokens;
    double cpu_us = 0, wall_us = 0;
    std::int64_t generated = 0, steps = 0;
    msa::EngineStats stats;
    double propose_us = 0, observe_us = 0;
    std::int64_t proposals = 0;
};

// Greedy generation of every prompt, one request at a time (single-stream decoding, where speculative decoding
// pays), with `drafter` verifying `k` drafts per step (nullptr: plain decoding). One engine thread, one model thread.
SpecRun spec_run(msa::ModelExecutor& model, msa::Drafter* drafter, int k,
                 const std::vector<std::vector<std::int32_t>>& prompts, int new_tokens, float temperature = 0.0f,
                 bool greedy_drafts = false) {
    msa::EngineConfig config;
    config.num_speculative_tokens = drafter != nullptr ? k : 0;
    std::unique_ptr<TimedDrafter> timed = drafter != nullptr ? std::make_unique<TimedDrafter>(*drafter) : nullptr;
    if (timed) timed->greedy_drafts = greedy_drafts;
    msa::Engine engine(config, model, nullptr, timed.get());
    SpecRun r;
    const double c0 = process_cpu_us();
    const auto t0 = Clock::now();
    std::uint64_t seed = 0;
    for (const auto& p : prompts) {
        msa::SamplingParams params;
        params.temperature = temperature;
        params.seed = ++seed;
        params.max_tokens = new_tokens;
        params.ignore_eos = true;
        auto h = engine.submit({.prompt = p, .params = params});
        std::vector<std::int32_t> out;
        while (auto ev = h->next()) {
            for (const auto& d : ev->samples) out.insert(out.end(), d.token_ids.begin(), d.token_ids.end());
        }
        r.generated += static_cast<std::int64_t>(out.size());
        r.tokens.push_back(std::move(out));
    }
    r.wall_us = us_since(t0);
    r.cpu_us = process_cpu_us() - c0;
    engine.shutdown();
    r.stats = engine.stats();
    r.steps = r.stats.num_steps;
    if (timed) {
        r.propose_us = timed->propose_us;
        r.observe_us = timed->observe_us;
        r.proposals = timed->proposals;
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, only;
    std::string spec_model = "models/default", spec_prompts = "bench/engine/heldout_prompts.json";
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--out" && i + 1 < argc) out_path = argv[++i];
        if (std::string(argv[i]) == "--only" && i + 1 < argc) only = argv[++i];  // scheduler, engine, cpu_model, spec, sample, hash
        if (std::string(argv[i]) == "--model" && i + 1 < argc) spec_model = argv[++i];
        if (std::string(argv[i]) == "--prompts" && i + 1 < argc) spec_prompts = argv[++i];
    }
    auto wanted = [&](const char* section) { return only.empty() || only == section; };
    const std::string date = run_command("date -u +%Y-%m-%d");
        const std::string commit = msa::bench::measured_commit();
    const std::string host = msa::bench::machine_description();
    nlohmann::json results = nlohmann::json::array();
    auto add = [&](const std::string& figure, double value, const std::string& unit, nlohmann::json extra = {}) {
        nlohmann::json j = {{"figure", "engine/" + figure},
                            {"value", value},
                            {"unit", unit},
                            {"date", date},
                            {"machine", host},
                            {"commit", commit}};
        if (unit.rfind("us/", 0) == 0)
            j["statistic"] = "CPU time (wall time on a shared machine also counts other jobs)";
        for (auto& [k, v] : extra.items()) j[k] = v;
        results.push_back(j);
        std::cout << fmt::format("{:<44} {:>12.2f} {}\n", figure, value, unit);
    };

    if (wanted("scheduler")) {
        add("scheduler_step_256_decode", scheduler_decode_step_us(256, 1000, true), "us/step",
            {{"note",
              "schedule + complete_step + append_token for 256 sequences decoding (1000-token prompts, 128-token "
              "pages), prefix caching on, no model; median of 7 runs of 300 steps"}});
        add("scheduler_step_256_decode_no_cache", scheduler_decode_step_us(256, 1000, false), "us/step",
            {{"note", "as above with prefix caching off (no block hashing or publishing)"}});
    }

    if (wanted("engine")) {
        const EngineRun e = engine_steady_state(256, 1024, 2048);
        const nlohmann::json engine_note = {
            {"note",
             "whole engine (thread, scheduler, greedy sampling over a 1024-token vocabulary, stop checks, events "
             "to callbacks) with 256 requests in flight: 512-token shared system prompt + 64..263 own tokens, "
             "64..255 output tokens, 2048 requests; process CPU time minus the fake model's forward"},
            {"steps", e.steps},
            {"generated_tokens", e.tokens},
            {"wall_us_per_step", e.wall_step_us}};
        add("engine_step_overhead_256", e.overhead_us, "us/step", engine_note);
        add("engine_overhead_per_token_256",
            e.overhead_us * static_cast<double>(e.steps) / static_cast<double>(e.tokens), "us/token", engine_note);
        add("engine_fake_model_forward_256", e.forward_us, "us/step", engine_note);
    }

    if (wanted("cpu_model")) {
        const int requests = 32, prompt_len = 256, new_tokens = 64;
        const CpuModelRun c = cpu_model_engine_vs_direct(requests, prompt_len, new_tokens);
        const nlohmann::json note = {
            {"note", fmt::format("tiny random MiniMax-M3 (3 layers, hidden 128, 2 MSA + 2 MoE layers, vocabulary 2048, "
                                 "NVFP4 KV), {} requests of {} prompt + {} greedy tokens, one CPU thread; direct: "
                                 "the model's own loop one sequence at a time; engine: all requests at once",
                                 requests, prompt_len, new_tokens)},
            {"engine_steps", c.steps},
            {"engine_tokens_equal_direct", c.same_tokens}};
        add("cpu_model_direct_loop", c.direct_us_per_token, "us/token", note);
        add("cpu_model_engine_batched", c.engine_us_per_token, "us/token", note);
        add("cpu_model_engine_forward_per_step", c.engine_forward_us_per_step, "us/step", note);
        add("cpu_model_engine_overhead_per_step", c.engine_overhead_us_per_step, "us/step", note);
        if (!c.same_tokens) std::cout << "WARNING: the engine's tokens differ from the direct loop's\n";
    }

    if (wanted("spec")) {
        // Speculative decoding with the model's DSpark drafter against plain decoding: greedy, so the tokens must
        // match; acceptance length = tokens per target step.
        const msa::ModelBundle bundle = msa::load_model_bundle(spec_model);
        MSA_CHECK(bundle.tokenizer != nullptr, "{} has no tokenizer.json", spec_model);
        std::ifstream pf(spec_prompts);
        MSA_CHECK(pf.good(), "cannot read {}", spec_prompts);
        const auto doc = nlohmann::json::parse(pf);
        std::vector<std::vector<std::int32_t>> prompts;
        for (const auto& text : doc.at("prompts")) prompts.push_back(bundle.tokenizer->encode(text.get<std::string>(), true));
        const int new_tokens = 128;
        msa::CpuModelExecutorOptions mo;
        mo.threads = 1;
        auto model = msa::load_cpu_model_executor(bundle.dir, mo);
        msa::DSparkLoadOptions dopt;
        dopt.target_dir = bundle.dir.string();
        auto drafter = msa::load_dspark_drafter((bundle.dir / "drafter").string(), dopt);
        // The prompts' prefill (and first token) alone, subtracted so that the figures are per decoded token.
        const SpecRun prefill = spec_run(*model, nullptr, 0, prompts, 1);
        auto decode_us = [&](const SpecRun& r) {
            return (r.cpu_us - prefill.cpu_us) / static_cast<double>(r.generated - prefill.generated);
        };
        const SpecRun base = spec_run(*model, nullptr, 0, prompts, new_tokens);
        const nlohmann::json base_note = {
            {"note", fmt::format("{} ({}), {} held-out prompts ({}), {} greedy tokens each, one request at a time, "
                                 "one model thread; process CPU time per decoded token (the prompts' prefill, timed alone, "
                                 "subtracted)",
                                 spec_model, "default config: NVFP4 KV, MSA", prompts.size(), spec_prompts,
                                 new_tokens)},
            {"steps", base.steps}, {"wall_us_per_token", base.wall_us / static_cast<double>(base.generated)}};
        add("spec_off_us_per_token", decode_us(base), "us/token", base_note);
        for (const int k : {3, 7}) {
            const SpecRun r = spec_run(*model, drafter.get(), k, prompts, new_tokens);
            int same = 0;
            for (std::size_t i = 0; i < prompts.size(); ++i) same += r.tokens[i] == base.tokens[i];
            const double drafts = static_cast<double>(std::max<std::int64_t>(1, r.stats.spec_num_drafts));
            nlohmann::json note = base_note;
            note["num_speculative_tokens"] = k;
            note["steps"] = r.steps;
            note["wall_us_per_token"] = r.wall_us / static_cast<double>(r.generated);
            note["prompts_with_tokens_equal_to_plain_decoding"] = same;
            note["accepted_per_position"] = r.stats.spec_accepted_per_position;
            note["target_steps_per_decoded_token"] =
                static_cast<double>(r.steps - prefill.steps) / static_cast<double>(r.generated - prefill.generated);
            note["drafter_propose_us_per_call"] = r.propose_us / static_cast<double>(std::max<std::int64_t>(1, r.proposals));
            note["drafter_observe_us_per_generated_token"] = r.observe_us / static_cast<double>(r.generated);
            add(fmt::format("spec_dspark_k{}_acceptance_length", k),
                1.0 + static_cast<double>(r.stats.spec_num_accepted_tokens) / drafts, "tokens/step", note);
            add(fmt::format("spec_dspark_k{}_us_per_token", k), decode_us(r), "us/token", note);
            add(fmt::format("spec_dspark_k{}_speedup", k), decode_us(base) / decode_us(r), "x",
                {{"note", "CPU time of plain decoding over CPU time with the drafter (same prompts and tokens)"}});
        }
        // Sampling requests (temperature 1, seeded): drafts sampled from the drafter's q at the request's
        // temperature against greedy drafts (q one-hot); both lossless, the acceptance differs.
        for (const bool greedy : {true, false}) {
            const int k = 3;
            const SpecRun r = spec_run(*model, drafter.get(), k, prompts, new_tokens, 1.0f, greedy);
            const double drafts = static_cast<double>(std::max<std::int64_t>(1, r.stats.spec_num_drafts));
            nlohmann::json note = base_note;
            note["note"] = fmt::format("as spec_dspark_k{}, but the requests sample at temperature 1 (seeds 1..{}); "
                                       "drafts {}",
                                       k, prompts.size(),
                                       greedy ? "greedy (q one-hot)" : "sampled from the drafter's q at temperature 1");
            note["num_speculative_tokens"] = k;
            note["accepted_per_position"] = r.stats.spec_accepted_per_position;
            add(fmt::format("spec_dspark_k{}_temperature1_{}_drafts_acceptance_length", k, greedy ? "greedy" : "sampled"),
                1.0 + static_cast<double>(r.stats.spec_num_accepted_tokens) / drafts, "tokens/step", note);
        }
    }

    const int vocab = 200064;
    for (int k = 0; k < 1 && wanted("sample"); ++k)
        for (const SamplingCase& c :
             {SamplingCase{"greedy", 0.0f, 1.0f, 0, {}}, SamplingCase{"temperature", 0.8f, 1.0f, 0, {}},
              SamplingCase{"top_k50", 0.8f, 1.0f, 50, {}}, SamplingCase{"top_p0.95", 0.8f, 0.95f, 0, {}},
              SamplingCase{"top_p0.95_logprobs5", 0.8f, 0.95f, 0, 5}}) {
            add(fmt::format("sample_{}_vocab200064", c.name), sampling_us(vocab, c), "us/token",
                {{"note", "one sequence, one thread, MiniMax-M3's vocabulary size; median of 7 runs of 40 tokens"}});
        }
    if (wanted("hash"))
        add("prefix_hash_per_block", block_hash_us(), "us/block",
            {{"note", "SHA-256 chain over 128 int32 tokens (OpenSSL)"}});
    add("machine_load_average",
        run_command("cut -d' ' -f1 /proc/loadavg").empty() ? 0.0
                                                           : std::stod(run_command("cut -d' ' -f1 /proc/loadavg")),
        "processes", {{"note", "1-minute load average when the run ended (context for the wall-clock figures)"}});

    if (!out_path.empty()) {
        std::ofstream f(out_path);
        f << results.dump(2) << "\n";
        std::cout << "wrote " << out_path << "\n";
    }
    return 0;
}
