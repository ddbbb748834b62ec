// Scheduler: directed tests of chunked prefill, decode-first budgeting, FCFS admission, preemption, cancellation,
// prefix-cache hits, cache_salt, n > 1 forking and speculative steps; and randomised stress runs that check every
// invariant after every step and compare every output with a page-free reference generation.
#include "engine/scheduler.h"
#include "core/error.h"
#include "engine/fake_model.h"
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>

namespace msa {
namespace {

using testing::FakeModel;

constexpr std::int32_t kVocab = 48;
constexpr std::int32_t kEos = 0;

SchedulerConfig small_config(int num_pages, int page_size = 16) {
    SchedulerConfig c;
    c.num_pages = num_pages;
    c.page_size = page_size;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;
    c.max_model_len = std::min(num_pages * page_size, 512);
    return c;
}

std::unique_ptr<Sequence> make_seq(std::uint64_t id, std::vector<std::int32_t> prompt, std::int32_t index = 0) {
    auto s = std::make_unique<Sequence>();
    s->request_id = id;
    s->arrival = id;
    s->index = index;
    s->num_prompt = static_cast<std::int32_t>(prompt.size());
    s->tokens = std::move(prompt);
    return s;
}

std::vector<std::int32_t> tokens_of(int n, int salt) {
    std::vector<std::int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 1 + (i * 7 + salt * 13) % (kVocab - 1);
    return t;
}

// Runs one step with the fake model and appends `token` to every sequence that got logits.
ScheduledStep step_with(Scheduler& s, FakeModel& model, std::int32_t token = 5) {
    ScheduledStep step = s.schedule();
    ForwardOutput out;
    model.forward(step.batch, {}, out);
    s.complete_step(step);
    for (const auto& x : step.seqs) {
        if (x.num_logits > 0 && x.num_drafts == 0) s.append_token(*x.seq, token);
    }
    s.check_invariants();
    return step;
}

TEST(Scheduler, ChunkedPrefillRespectsTheTokenBudget) {
    auto cfg = small_config(64);
    cfg.max_num_batched_tokens = 40;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(100, 1));
    s.add(a.get());
    std::vector<int> chunks;
    while (a->num_computed < 100) {
        const auto step = step_with(s, model);
        ASSERT_EQ(step.seqs.size(), 1u);
        chunks.push_back(step.seqs[0].num_new_tokens);
        EXPECT_EQ(step.seqs[0].num_logits, a->num_computed == 100 ? 1 : 0);
        EXPECT_EQ(step.batch.seqs[0].past_len + step.seqs[0].num_new_tokens, a->num_computed);
    }
    EXPECT_EQ(chunks, (std::vector<int>{40, 40, 20}));
    EXPECT_EQ(a->num_tokens(), 101);  // the sampled token
}

TEST(Scheduler, DecodesGoFirstThenPrefillChunks) {
    auto cfg = small_config(64);
    cfg.max_num_batched_tokens = 32;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(10, 1)), b = make_seq(2, tokens_of(12, 2));
    s.add(a.get());
    s.add(b.get());
    step_with(s, model);  // both prompts fit in one step
    auto c = make_seq(3, tokens_of(200, 3));
    s.add(c.get());
    const auto step = step_with(s, model);
    ASSERT_EQ(step.seqs.size(), 3u);
    EXPECT_EQ(step.seqs[0].seq, a.get());
    EXPECT_EQ(step.seqs[0].num_new_tokens, 1);
    EXPECT_EQ(step.seqs[1].seq, b.get());
    EXPECT_EQ(step.seqs[1].num_new_tokens, 1);
    EXPECT_EQ(step.seqs[2].seq, c.get());
    EXPECT_EQ(step.seqs[2].num_new_tokens, 30);
    EXPECT_EQ(step.num_tokens, 32);
}

TEST(Scheduler, LongPrefillThresholdCapsAChunk) {
    auto cfg = small_config(64);
    cfg.max_num_batched_tokens = 64;
    cfg.long_prefill_token_threshold = 24;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(100, 1)), b = make_seq(2, tokens_of(100, 2));
    s.add(a.get());
    s.add(b.get());
    const auto step = step_with(s, model);
    ASSERT_EQ(step.seqs.size(), 2u);
    EXPECT_EQ(step.seqs[0].num_new_tokens, 24);
    EXPECT_EQ(step.seqs[1].num_new_tokens, 24);
}

TEST(Scheduler, MaxNumSeqsAndFcfsAdmission) {
    auto cfg = small_config(64);
    cfg.max_num_seqs = 2;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    std::vector<std::unique_ptr<Sequence>> seqs;
    for (int i = 0; i < 4; ++i) {
        seqs.push_back(make_seq(10 + i, tokens_of(5, i)));
        s.add(seqs.back().get());
    }
    auto step = step_with(s, model);
    ASSERT_EQ(step.seqs.size(), 2u);
    EXPECT_EQ(step.seqs[0].seq, seqs[0].get());
    EXPECT_EQ(step.seqs[1].seq, seqs[1].get());
    EXPECT_EQ(s.num_waiting(), 2);
    s.finish(*seqs[0]);
    step = step_with(s, model);
    ASSERT_EQ(step.admitted.size(), 1u);
    EXPECT_EQ(step.admitted[0], seqs[2].get());  // the oldest waiting one
}

TEST(Scheduler, HeadOfLineBlocksWhenItsPagesDoNotFit) {
    auto cfg = small_config(8);  // 8 pages of 16 tokens
    cfg.max_num_batched_tokens = 512;
    cfg.max_model_len = 128;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(70, 1));  // 5 pages
    auto b = make_seq(2, tokens_of(60, 2));  // 4 pages: does not fit next to a
    auto c = make_seq(3, tokens_of(5, 3));   // 1 page: would fit, but must not overtake b
    s.add(a.get());
    s.add(b.get());
    s.add(c.get());
    auto step = step_with(s, model);
    ASSERT_EQ(step.seqs.size(), 1u);
    EXPECT_EQ(s.num_waiting(), 2);
    s.finish(*a);
    step = step_with(s, model);
    EXPECT_EQ(step.admitted.front(), b.get());
}

TEST(Scheduler, PreemptsTheNewestWhenPagesRunOut) {
    auto cfg = small_config(6, 16);  // 96 token slots
    cfg.max_model_len = 96;
    cfg.max_num_batched_tokens = 256;
    cfg.enable_prefix_caching = false;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(32, 1)), b = make_seq(2, tokens_of(32, 2)), c = make_seq(3, tokens_of(31, 3));
    s.add(a.get());
    s.add(b.get());
    s.add(c.get());
    step_with(s, model);  // 2 + 2 + 2 pages: the pool is full
    EXPECT_EQ(s.block_manager().num_free_pages(), 0);
    // a and b each need a third page for their next token; c (newest) is preempted to make room.
    auto step = step_with(s, model);
    ASSERT_EQ(step.preempted.size(), 1u);
    EXPECT_EQ(step.preempted[0], c.get());
    EXPECT_EQ(c->status, SequenceStatus::waiting);
    EXPECT_TRUE(c->pages.empty());
    EXPECT_EQ(c->num_computed, 0);
    EXPECT_EQ(c->num_tokens(), 32);  // keeps its generated token: recomputed later
    EXPECT_EQ(s.num_preemptions(), 1);
    EXPECT_TRUE(step.admitted.empty());  // no admission in a step that had to preempt
}

TEST(Scheduler, CancellationMidPrefillFreesPagesAtOnce) {
    auto cfg = small_config(32);
    cfg.max_num_batched_tokens = 32;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(300, 1));
    s.add(a.get());
    step_with(s, model);
    step_with(s, model);
    EXPECT_EQ(a->num_computed, 64);
    EXPECT_GT(s.block_manager().num_used_pages(), 0);
    s.finish(*a);
    EXPECT_EQ(s.block_manager().num_used_pages(), 0);
    EXPECT_EQ(s.num_running(), 0);
    s.check_invariants();
    // Cancelling a waiting sequence just drops it.
    auto b = make_seq(2, tokens_of(10, 2));
    s.add(b.get());
    s.finish(*b);
    EXPECT_EQ(s.num_waiting(), 0);
}

TEST(Scheduler, PrefixCacheHitsReuseFullBlocksOnly) {
    auto cfg = small_config(64);
    cfg.max_num_batched_tokens = 512;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    const auto prompt = tokens_of(50, 1);  // 3 full blocks of 16 + 2 tokens
    auto a = make_seq(1, prompt);
    s.add(a.get());
    step_with(s, model);
    s.finish(*a);
    auto b = make_seq(2, prompt);
    s.add(b.get());
    auto step = s.schedule();
    EXPECT_EQ(b->num_cached_tokens, 48);
    EXPECT_EQ(step.seqs[0].num_new_tokens, 2);
    EXPECT_EQ(step.batch.seqs[0].past_len, 48);
    EXPECT_EQ(s.block_manager().counters().hits, 48);
    EXPECT_EQ(s.block_manager().counters().queries, 100);
    ForwardOutput out;
    model.forward(step.batch, {}, out);  // reads the cached pages: throws if they were stale
    s.complete_step(step);

    // A prompt of exactly 3 blocks recomputes its last block (the last token needs logits).
    auto c = make_seq(3, std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 48));
    s.add(c.get());
    step = s.schedule();
    EXPECT_EQ(c->num_cached_tokens, 32);
    // Another salt sees nothing.
    auto d = make_seq(4, prompt);
    d->cache_salt = "tenant";
    s.add(d.get());
    step = s.schedule();
    EXPECT_EQ(d->num_cached_tokens, 0);
    s.check_invariants();
}

TEST(Scheduler, ForkedSamplesShareThePromptsFullBlocks) {
    for (bool caching : {true, false}) {
        auto cfg = small_config(64);
        cfg.max_num_batched_tokens = 512;
        cfg.enable_prefix_caching = caching;
        Scheduler s(cfg);
        FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
        model.on_write = [&](PageId p) {
            if (s.block_manager().ref_count(p) != 1) throw Error("write into a shared page");
        };
        const auto prompt = tokens_of(40, 1);  // 2 full blocks + 8
        auto lead = make_seq(1, prompt, 0), sib1 = make_seq(1, prompt, 1), sib2 = make_seq(1, prompt, 2);
        sib1->fork_source = sib2->fork_source = lead.get();
        s.add(lead.get());
        s.add(sib1.get());
        s.add(sib2.get());
        auto step = step_with(s, model);
        ASSERT_EQ(step.seqs.size(), 1u) << "siblings wait for the leader's prefill";
        step = step_with(s, model);
        ASSERT_EQ(step.admitted.size(), 2u);
        for (Sequence* sib : {sib1.get(), sib2.get()}) {
            EXPECT_EQ(sib->num_cached_tokens, 32);
            EXPECT_EQ(sib->pages[0], lead->pages[0]);
            EXPECT_EQ(sib->pages[1], lead->pages[1]);
            EXPECT_NE(sib->pages[2], lead->pages[2]);  // the partial last block is private
        }
        EXPECT_EQ(s.block_manager().ref_count(lead->pages[0]), 3);
        EXPECT_NE(sib1->pages[2], sib2->pages[2]);
    }
}

TEST(Scheduler, SpeculativeStepsCarryDraftsAndRollBackRejections) {
    auto cfg = small_config(64);
    cfg.max_num_batched_tokens = 256;
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    auto a = make_seq(1, tokens_of(14, 1));
    s.add(a.get());
    step_with(s, model);  // prefill; token 5 appended
    a->draft_tokens = {6, 7, 8, 9};
    auto step = s.schedule();
    ASSERT_EQ(step.seqs.size(), 1u);
    EXPECT_EQ(step.seqs[0].num_new_tokens, 5);
    EXPECT_EQ(step.seqs[0].num_drafts, 4);
    EXPECT_EQ(step.seqs[0].num_logits, 5);
    EXPECT_EQ(std::vector<std::int32_t>(step.batch.seqs[0].tokens.begin(), step.batch.seqs[0].tokens.end()),
              (std::vector<std::int32_t>{5, 6, 7, 8, 9}));
    ForwardOutput out;
    model.forward(step.batch, {}, out);
    s.complete_step(step);
    EXPECT_EQ(a->num_computed, 15);  // drafts are not computed tokens until accepted
    s.accept_drafts(*a, 2);          // 6 and 7 accepted, 8 rejected -> correction 11
    s.append_token(*a, 11);
    EXPECT_EQ(a->num_computed, 17);
    EXPECT_EQ(a->num_tokens(), 18);
    s.check_invariants();
    // The next step writes the correction over the rejected draft's slot and reads the accepted tokens' state:
    // its logits equal those of computing 5, 6, 7, 11 plainly.
    step = s.schedule();
    EXPECT_EQ(step.batch.seqs[0].past_len, 17);
    ForwardOutput out2;
    model.forward(step.batch, {}, out2);
    std::vector<std::int32_t> expected = tokens_of(14, 1);
    for (int t : {5, 6, 7, 11}) expected.push_back(t);
    EXPECT_EQ(out2.logits, model.reference_logits(expected));
}

TEST(Scheduler, RejectsAModelLengthTheCacheCannotHold) {
    SchedulerConfig c = small_config(4, 16);
    c.max_model_len = 65;
    EXPECT_THROW(Scheduler{c}, Error);
}

// ---- Randomised stress: every invariant after every step, outputs equal to a page-free reference -------------

struct StressRequest {
    std::vector<std::int32_t> prompt;
    std::int32_t max_tokens;
    std::int32_t n;
    float temperature;
    std::uint64_t seed;
    std::string salt;
    int arrival_step;
    int cancel_step;  // -1: never
};

std::vector<StressRequest> make_workload(std::uint64_t seed, int count, int max_prompt) {
    RequestRng rng(seed, 0);
    int draw = 0;
    auto u = [&] { return rng.uniform(draw++); };
    // A few shared prefixes so that the prefix cache has something to find.
    std::vector<std::vector<std::int32_t>> prefixes;
    for (int i = 0; i < 3; ++i) prefixes.push_back(tokens_of(10 + static_cast<int>(u() * max_prompt / 2), 100 + i));
    std::vector<StressRequest> reqs;
    for (int i = 0; i < count; ++i) {
        StressRequest r;
        if (u() < 0.6) r.prompt = prefixes[static_cast<int>(u() * prefixes.size())];
        const int extra = 1 + static_cast<int>(u() * max_prompt / 2);
        for (int j = 0; j < extra; ++j) r.prompt.push_back(1 + static_cast<std::int32_t>(u() * (kVocab - 1)));
        r.max_tokens = 1 + static_cast<int>(u() * 40);
        r.n = u() < 0.2 ? 2 + static_cast<int>(u() * 2) : 1;
        r.temperature = u() < 0.3 ? 0.0f : 0.8f;
        r.seed = 1000 + i;
        r.salt = u() < 0.15 ? "tenant-b" : "";
        r.arrival_step = static_cast<int>(u() * count * 2);
        r.cancel_step = u() < 0.1 ? r.arrival_step + static_cast<int>(u() * 30) : -1;
        reqs.push_back(std::move(r));
    }
    return reqs;
}

SamplingParams params_of(const StressRequest& r) {
    SamplingParams p;
    p.temperature = r.temperature;
    p.top_k = 20;
    return p;
}

// What one sample generates, computed without pages: the fake model's logits straight from the token list.
std::vector<std::int32_t> reference_output(const FakeModel& model, Sampler& sampler, const StressRequest& r,
                                           int index) {
    std::vector<std::int32_t> tokens = r.prompt;
    TokenHistory history(r.prompt, false);
    RequestRng rng(r.seed, index);
    std::vector<std::int32_t> out;
    while (static_cast<int>(out.size()) < r.max_tokens) {
        const auto t = sampler.sample(model.reference_logits(tokens), params_of(r), history, rng, out.size()).token;
        out.push_back(t);
        tokens.push_back(t);
        history.add_output(t);
        if (t == kEos) break;
    }
    return out;
}

struct StressResult {
    std::map<std::pair<int, int>, std::vector<std::int32_t>> outputs;
    std::map<std::pair<int, int>, bool> cancelled;
    std::int64_t preemptions = 0, hits = 0, steps = 0;
};

StressResult run_stress(const std::vector<StressRequest>& reqs, const SchedulerConfig& cfg) {
    Scheduler s(cfg);
    FakeModel model(kVocab, cfg.num_pages, cfg.max_model_len, cfg.page_size);
    model.on_write = [&](PageId p) {
        // The engine may only write into pages no one else references and that are not published in the cache.
        if (s.block_manager().ref_count(p) != 1 || s.block_manager().is_registered(p)) {
            throw Error(fmt::format("model wrote into page {} (refcount {}, registered {})", p,
                                    s.block_manager().ref_count(p), s.block_manager().is_registered(p)));
        }
    };
    Sampler sampler(SamplerConfig{kVocab, {kEos}, LogprobsMode::raw});
    struct Live {
        std::unique_ptr<Sequence> seq;
        TokenHistory history;
        int req;
        bool done = false;
    };
    std::vector<std::unique_ptr<Live>> live;
    StressResult result;
    int remaining = 0;
    for (const auto& r : reqs) remaining += r.n;
    for (int step_no = 0; remaining > 0; ++step_no) {
        if (step_no > 20000) throw Error("stress run does not terminate");
        for (std::size_t i = 0; i < reqs.size(); ++i) {
            const auto& r = reqs[i];
            if (r.arrival_step == step_no) {
                Sequence* lead = nullptr;
                for (int k = 0; k < r.n; ++k) {
                    auto l = std::make_unique<Live>();
                    l->seq = make_seq(i + 1, r.prompt, k);
                    l->seq->cache_salt = r.salt;
                    l->seq->fork_source = lead;
                    if (k == 0) lead = l->seq.get();
                    l->history = TokenHistory(r.prompt, false);
                    l->req = static_cast<int>(i);
                    s.add(l->seq.get());
                    live.push_back(std::move(l));
                }
            }
        }
        for (auto& l : live) {
            if (!l->done && reqs[l->req].cancel_step == step_no) {
                s.finish(*l->seq);
                l->done = true;
                result.cancelled[{l->req, l->seq->index}] = true;
                result.outputs[{l->req, l->seq->index}] =
                    std::vector<std::int32_t>(l->seq->tokens.begin() + l->seq->num_prompt, l->seq->tokens.end());
                --remaining;
            }
        }
        s.check_invariants();
        if (s.num_running() + s.num_waiting() == 0) continue;
        ScheduledStep step = s.schedule();
        if (step.empty()) throw Error("the scheduler made no progress");
        if (step.num_tokens > cfg.max_num_batched_tokens) throw Error("step exceeds the token budget");
        ForwardOutput out;
        model.forward(step.batch, {}, out);
        s.complete_step(step);
        std::size_t row = 0;
        for (const auto& x : step.seqs) {
            if (x.num_logits == 0) continue;
            Live* l = nullptr;
            for (auto& c : live) {
                if (c->seq.get() == x.seq) l = c.get();
            }
            const StressRequest& r = reqs[l->req];
            auto logits = std::span<const float>(out.logits).subspan(row * kVocab, kVocab);
            ++row;
            const auto t =
                sampler.sample(logits, params_of(r), l->history, RequestRng(r.seed, x.seq->index), x.seq->num_output())
                    .token;
            s.append_token(*x.seq, t);
            l->history.add_output(t);
            if (t == kEos || x.seq->num_output() >= r.max_tokens) {
                s.finish(*x.seq);
                l->done = true;
                result.outputs[{l->req, x.seq->index}] =
                    std::vector<std::int32_t>(x.seq->tokens.begin() + x.seq->num_prompt, x.seq->tokens.end());
                --remaining;
            }
        }
        s.check_invariants();
        ++result.steps;
    }
    s.check_invariants();
    if (s.block_manager().num_used_pages() != 0) throw Error("pages leaked after every sequence finished");
    result.preemptions = s.num_preemptions();
    result.hits = s.block_manager().counters().hits;
    return result;
}

void expect_matches_reference(const std::vector<StressRequest>& reqs, const StressResult& got, int page_size) {
    FakeModel model(kVocab, 1, 1 << 20, page_size);
    Sampler sampler(SamplerConfig{kVocab, {kEos}, LogprobsMode::raw});
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        for (int k = 0; k < reqs[i].n; ++k) {
            const auto key = std::make_pair(static_cast<int>(i), k);
            const auto expected = reference_output(model, sampler, reqs[i], k);
            const auto& output = got.outputs.at(key);
            if (got.cancelled.count(key)) {
                ASSERT_LE(output.size(), expected.size());
                ASSERT_TRUE(std::equal(output.begin(), output.end(), expected.begin())) << "request " << i;
            } else {
                ASSERT_EQ(output, expected) << "request " << i << " sample " << k;
            }
        }
    }
}

struct StressCase {
    const char* name;
    int num_pages, page_size, budget, max_seqs, threshold;
    bool caching;
    int max_prompt = 100;
    int max_model_len = 160;
};

void PrintTo(const StressCase& c, std::ostream* os) {
    *os << c.name;
}

class SchedulerStress : public ::testing::TestWithParam<StressCase> {};

TEST_P(SchedulerStress, InvariantsHoldAndOutputsMatchTheReference) {
    const StressCase c = GetParam();
    SchedulerConfig cfg;
    cfg.num_pages = c.num_pages;
    cfg.page_size = c.page_size;
    cfg.max_num_batched_tokens = c.budget;
    cfg.max_num_seqs = c.max_seqs;
    cfg.long_prefill_token_threshold = c.threshold;
    cfg.enable_prefix_caching = c.caching;
    cfg.max_model_len = c.max_model_len;
    std::int64_t preemptions = 0, hits = 0;
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto reqs = make_workload(seed, 40, c.max_prompt);
        const StressResult r = run_stress(reqs, cfg);
        expect_matches_reference(reqs, r, c.page_size);
        preemptions += r.preemptions;
        hits += r.hits;
    }
    // The configurations are chosen so that each exercises what it is named after.
    if (std::string(c.name).find("tiny_pool") != std::string::npos) {
        EXPECT_GT(preemptions, 0);
    }
    if (c.caching) {
        EXPECT_GT(hits, 0);
    } else {
        EXPECT_EQ(hits, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Configs, SchedulerStress,
                         ::testing::Values(StressCase{"roomy_cached", 400, 16, 256, 16, 0, true},
                                           StressCase{"roomy_uncached", 400, 16, 256, 16, 0, false},
                                           StressCase{"tiny_pool_cached", 12, 16, 96, 8, 0, true},
                                           StressCase{"tiny_pool_uncached", 11, 16, 64, 8, 0, false},
                                           StressCase{"small_chunks", 200, 16, 40, 4, 13, true},
                                           StressCase{"one_seq_at_a_time", 40, 16, 512, 1, 0, true},
                                           StressCase{"page_128_tiny_pool", 5, 128, 256, 8, 0, true, 360, 420}),
                         [](const ::testing::TestParamInfo<StressCase>& param_info) {
                             return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace msa
