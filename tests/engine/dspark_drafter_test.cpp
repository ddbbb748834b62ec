// DSparkDrafter's state logic and DSparkModel's loading errors, on a tiny random drafter beside a random target
// checkpoint. The expectation for drafts is DSparkModel run directly on a context built here, position by position,
// from the observations that should count (an independent path from the drafter's row buffers).
#include "engine/dspark_drafter.h"
#include "engine/chi_square.h"
#include "core/error.h"
#include "formats/convert.h"
#include "formats/safetensors_writer.h"
#include "model/dspark_model.h"
#include "model/random_checkpoint.h"
#include "support/test_configs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>

namespace msa {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kHidden = 128, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 32, kInter = 96, kVocab = 320;
constexpr int kBlock = 4, kWindow = 16, kRank = 8;
const std::vector<int> kTapLayers = {2, 0};  // not sorted: the taps row order is this list's

std::string drafter_config(const std::string& extra = "") {
    return fmt::format(R"({{"architectures": ["DSparkMiniMaxDraftModel"], "model_type": "dspark",
 "hidden_size": {}, "num_hidden_layers": {}, "num_attention_heads": {}, "num_key_value_heads": {}, "head_dim": {},
 "rotary_dim": 16, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "use_gemma_norm": true, "use_qk_norm": true,
 "qk_norm_type": "per_head", "hidden_act": "swigluoai", "intermediate_size": {}, "swiglu_alpha": 1.702,
 "swiglu_limit": 7.0, "vocab_size": {}, "target_layer_ids": [2, 0], "dspark_block_size": {}, "mask_token_id": {},
 "sliding_window": {}, "causal": false, "markov_head": {{"type": "vanilla", "rank": {}}},
 "shares_target_embeddings": true, "shares_target_lm_head": true, "target_model": ".."{}}})",
                       kHidden, kLayers, kHeads, kKvHeads, kHeadDim, kInter, kVocab, kBlock, kVocab - 1, kWindow, kRank,
                       extra);
}

// name -> shape of every drafter tensor.
std::map<std::string, std::vector<std::int64_t>> drafter_shapes() {
    std::map<std::string, std::vector<std::int64_t>> s;
    const std::int64_t taps = static_cast<std::int64_t>(kTapLayers.size()) * kHidden;
    s["fc.weight"] = {kHidden, taps};
    s["hidden_norm.weight"] = {kHidden};
    s["norm.weight"] = {kHidden};
    for (int l = 0; l < kLayers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        s[p + "input_layernorm.weight"] = {kHidden};
        s[p + "post_attention_layernorm.weight"] = {kHidden};
        s[p + "self_attn.q_norm.weight"] = {kHeadDim};
        s[p + "self_attn.k_norm.weight"] = {kHeadDim};
        s[p + "self_attn.q_proj.weight"] = {kHeads * kHeadDim, kHidden};
        s[p + "self_attn.k_proj.weight"] = {kKvHeads * kHeadDim, kHidden};
        s[p + "self_attn.v_proj.weight"] = {kKvHeads * kHeadDim, kHidden};
        s[p + "self_attn.o_proj.weight"] = {kHidden, kHeads * kHeadDim};
        s[p + "mlp.gate_proj.weight"] = {kInter, kHidden};
        s[p + "mlp.up_proj.weight"] = {kInter, kHidden};
        s[p + "mlp.down_proj.weight"] = {kHidden, kInter};
    }
    s["markov_head.w1.weight"] = {kVocab, kRank};
    s["markov_head.w2.weight"] = {kVocab, kRank};
    return s;
}

// Writes a random target (dir) and drafter (dir/drafter); `edit` may change the drafter's tensors before writing.
void write_checkpoints(const fs::path& dir, const std::string& config_extra = "",
                       const std::function<void(std::map<std::string, std::vector<std::int64_t>>&)>& edit = {}) {
    test::TinyConfig tc;
    tc.hidden = kHidden;
    tc.vocab = kVocab;
    tc.kv_cache_quant_algo = "";
    RandomCheckpointSpec spec;
    spec.config_json = test::tiny_config_json(tc);
    write_random_checkpoint(dir, spec);
    auto shapes = drafter_shapes();
    if (edit) edit(shapes);
    std::mt19937 rng(11);
    SafetensorsWriter w;
    for (const auto& [name, shape] : shapes) {
        std::int64_t n = 1;
        for (const auto d : shape) n *= d;
        const bool norm = shape.size() == 1;
        const float scale =
            norm ? 0.2f : (name.find("markov_head.w1") != std::string::npos ? 1.0f : 1.7f / std::sqrt(float(shape[1])));
        std::uniform_real_distribution<float> dist(-scale, scale);
        std::vector<float> f(static_cast<std::size_t>(n));
        for (auto& x : f) x = dist(rng);
        std::vector<std::uint16_t> bits(f.size());
        float_to_bf16(f.data(), bits.data(), f.size());
        w.add_typed<std::uint16_t>(name, DType::BF16, shape, bits);
    }
    fs::create_directories(dir / "drafter");
    w.write(dir / "drafter" / "model.safetensors");
    std::ofstream(dir / "drafter" / "config.json") << drafter_config(config_extra);
}

class DSparkDrafterTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new fs::path(fs::temp_directory_path() / ("dspark_drafter_test_" + std::to_string(::getpid())));
        fs::remove_all(*dir_);
        write_checkpoints(*dir_);
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir_);
        delete dir_;
    }
    void SetUp() override {
        drafter_ = load_dspark_drafter((*dir_ / "drafter").string());
        std::mt19937 rng(5);
        std::uniform_int_distribution<int> tok(0, kVocab - 2);
        std::normal_distribution<float> val(0.0f, 1.0f);
        tokens_.resize(80);
        for (auto& t : tokens_) t = tok(rng);
        taps_.resize(tokens_.size() * width());
        for (auto& x : taps_) x = val(rng);
    }

    std::size_t width() const { return kTapLayers.size() * kHidden; }
    std::span<const float> taps(std::int32_t p, std::int32_t count) const {
        return std::span(taps_).subspan(p * width(), count * width());
    }
    std::span<const std::int32_t> toks(std::int32_t p, std::int32_t count) const {
        return std::span(tokens_).subspan(p, count);
    }
    std::vector<float> junk(std::int32_t count) const { return std::vector<float>(count * width(), -2.5f); }

    // Drafts from DSparkModel directly: anchor tokens[n] at n, the context = the given (position -> taps row).
    std::vector<std::int32_t> expected(const std::vector<std::int32_t>& tokens, std::int32_t n,
                                       const std::map<std::int32_t, const float*>& rows, int num = kBlock) const {
        const DSparkModel& m = drafter_->model();
        const auto kv = static_cast<std::size_t>(m.config().kv_dim());
        const std::int32_t first = std::max(0, n - kWindow);
        const auto count = static_cast<std::size_t>(n - first);
        std::vector<std::vector<float>> k(kLayers, std::vector<float>(count * kv)), v = k;
        std::vector<std::uint8_t> valid(count, 0);
        for (const auto& [p, row] : rows) {
            if (p < first || p >= n) continue;
            std::vector<float*> kp, vp;
            for (int l = 0; l < kLayers; ++l) {
                kp.push_back(k[l].data() + (p - first) * kHeadDim);
                vp.push_back(v[l].data() + (p - first));
            }
            m.context_kv(row, 1, p, kp, vp, static_cast<std::int64_t>(count));
            valid[p - first] = 1;
        }
        DSparkContext ctx;
        ctx.first_position = first;
        ctx.count = static_cast<std::int64_t>(count);
        ctx.head_stride = ctx.count;
        ctx.valid = valid.data();
        for (int l = 0; l < kLayers; ++l) ctx.layers.push_back({k[l].data(), v[l].data()});
        std::vector<float> u(kBlock * kVocab);
        m.block_logits(tokens[n], n, ctx, kBlock, u.data());
        std::vector<std::int32_t> drafts;
        m.greedy_drafts(u.data(), tokens[n], num, drafts);
        return drafts;
    }
    std::map<std::int32_t, const float*> real_rows(std::int32_t begin, std::int32_t end) const {
        std::map<std::int32_t, const float*> rows;
        for (std::int32_t p = begin; p < end; ++p) rows[p] = taps_.data() + p * width();
        return rows;
    }
    std::vector<std::int32_t> propose(std::uint64_t req, std::int32_t sample, std::span<const std::int32_t> tokens,
                                      int max_drafts = kBlock) {
        std::vector<std::int32_t> drafts;
        std::vector<float> probs;
        drafter_->propose(req, sample, tokens, max_drafts, drafts, probs);
        EXPECT_TRUE(probs.empty());
        return drafts;
    }

    static fs::path* dir_;
    std::unique_ptr<DSparkDrafter> drafter_;
    std::vector<std::int32_t> tokens_;
    std::vector<float> taps_;
};

fs::path* DSparkDrafterTest::dir_ = nullptr;

TEST_F(DSparkDrafterTest, TapLayersAreTheConfigsInOrder) {
    EXPECT_EQ(drafter_->tap_layers(), kTapLayers);
}

// Decode with speculative verify steps: every step observes the anchor and its drafts, a few of which are accepted
// (real taps) and the rest rejected (junk taps); the next propose must see exactly the real positions in the window,
// long past the point where old rows are dropped and the buffers shift.
TEST_F(DSparkDrafterTest, VerifyStepsWithRejectedDraftsMatchTheModel) {
    const std::int32_t prompt = 9;
    drafter_->observe(1, 0, 0, toks(0, prompt - 1), taps(0, prompt - 1));
    std::int32_t n = prompt - 1;  // anchor
    std::mt19937 rng(3);
    int checked = 0;
    while (n + 1 + kBlock < static_cast<std::int32_t>(tokens_.size())) {
        const auto drafts = propose(1, 0, toks(0, n + 1));
        ASSERT_EQ(drafts, expected(tokens_, n, real_rows(0, n))) << "anchor " << n;
        ++checked;
        const int accepted = std::uniform_int_distribution<int>(0, kBlock)(rng);
        std::vector<float> step(taps(n, 1 + accepted).begin(), taps(n, 1 + accepted).end());
        const auto bad = junk(kBlock - accepted);
        step.insert(step.end(), bad.begin(), bad.end());
        drafter_->observe(1, 0, n, toks(n, 1 + kBlock), step);
        n += 1 + accepted;
    }
    EXPECT_GT(checked, 10);
    EXPECT_GT(n, 3 * kWindow);  // well past the window: rows were dropped and shifted
}

TEST_F(DSparkDrafterTest, PrefillInOneLongChunkKeepsTheWindow) {
    const std::int32_t n = 70;
    drafter_->observe(2, 0, 0, toks(0, n), taps(0, n));
    EXPECT_EQ(propose(2, 0, toks(0, n + 1)), expected(tokens_, n, real_rows(0, n)));
    EXPECT_EQ(propose(2, 0, toks(0, n + 1), 2), expected(tokens_, n, real_rows(0, n), 2));
}

TEST_F(DSparkDrafterTest, ReplacedObservationsWin) {
    const std::int32_t n = 12;
    drafter_->observe(3, 0, 0, toks(0, n), junk(n));
    drafter_->observe(3, 0, 0, toks(0, n), taps(0, n));  // preemption by recompute
    EXPECT_EQ(propose(3, 0, toks(0, n + 1)), expected(tokens_, n, real_rows(0, n)));
    // An observation replaces its positions and drops what followed: junk at [4, 8), then the real [4, 12) again.
    drafter_->observe(3, 0, 4, toks(4, 4), junk(4));
    drafter_->observe(3, 0, 4, toks(4, 8), taps(4, 8));
    EXPECT_EQ(propose(3, 0, toks(0, n + 1)), expected(tokens_, n, real_rows(0, n)));
    // A shorter re-observation drops the rows after it: positions [6, 12) are gone.
    drafter_->observe(3, 0, 0, toks(0, 6), taps(0, 6));
    EXPECT_EQ(propose(3, 0, toks(0, n + 1)), expected(tokens_, n, real_rows(0, 6)));
}

TEST_F(DSparkDrafterTest, UnobservedPositionsAreMasked) {
    // A prefix-cache hit: the target computed only [5, 14); a gap at [9, 11) too.
    drafter_->observe(4, 0, 5, toks(5, 4), taps(5, 4));
    drafter_->observe(4, 0, 11, toks(11, 3), taps(11, 3));
    auto rows = real_rows(5, 9);
    rows.merge(real_rows(11, 14));
    EXPECT_EQ(propose(4, 0, toks(0, 15)), expected(tokens_, 14, rows));
    // A gap where the buffer once held non-finite rows (a re-observation dropped them): they stay masked and harmless.
    std::vector<float> nan_taps(3 * width(), std::numeric_limits<float>::quiet_NaN());
    drafter_->observe(10, 0, 0, toks(0, 5), taps(0, 5));
    drafter_->observe(10, 0, 5, toks(5, 3), nan_taps);
    drafter_->observe(10, 0, 0, toks(0, 5), taps(0, 5));  // drops positions 5..7
    drafter_->observe(10, 0, 10, toks(10, 2), taps(10, 2));
    auto around_gap = real_rows(0, 5);
    around_gap.merge(real_rows(10, 12));
    EXPECT_EQ(propose(10, 0, toks(0, 13)), expected(tokens_, 12, around_gap));
    // Nothing observed at all: the block attends to itself only.
    EXPECT_EQ(propose(5, 0, toks(0, 15)), expected(tokens_, 14, {}));
}

TEST_F(DSparkDrafterTest, SamplesShareThePromptOfSampleZero) {
    const std::int32_t prompt = 10;
    // Sample 0 prefilled the prompt and decoded a few tokens; sample 1 (a prefix-cache hit on the prompt) has only
    // its own generated tokens observed, which differ from sample 0's.
    drafter_->observe(6, 0, 0, toks(0, prompt + 3), taps(0, prompt + 3));
    std::vector<std::int32_t> other(tokens_.begin(), tokens_.begin() + prompt);
    for (int i = 0; i < 4; ++i) other.push_back((tokens_[prompt + i] + 7) % (kVocab - 1));
    std::vector<float> other_taps(4 * width());
    for (std::size_t i = 0; i < other_taps.size(); ++i) other_taps[i] = 0.5f * taps_[(prompt + 20) * width() + i];
    drafter_->observe(6, 1, prompt, std::span(other).subspan(prompt, 3), std::span(other_taps).first(3 * width()));
    auto rows = real_rows(0, prompt);
    for (int i = 0; i < 3; ++i) rows[prompt + i] = other_taps.data() + i * width();
    EXPECT_EQ(propose(6, 1, std::span(other).first(prompt + 4)), expected(other, prompt + 3, rows));
    // Where the samples' tokens differ, sample 0's rows are not used: from position 4 on they are masked.
    other[4] = (other[4] + 1) % (kVocab - 1);
    auto early = real_rows(0, 4);
    for (int i = 0; i < 3; ++i) early[prompt + i] = other_taps.data() + i * width();
    EXPECT_EQ(propose(6, 1, std::span(other).first(prompt + 4)), expected(other, prompt + 3, early));
    // Sample 0 is unaffected.
    EXPECT_EQ(propose(6, 0, toks(0, prompt + 4)), expected(tokens_, prompt + 3, real_rows(0, prompt + 3)));
}

// Probabilistic drafting (a sampling request): each draft is drawn from the q row it reports, q_j is the softmax at
// the request's temperature of the model's block logits plus the Markov term of the previous draft (computed here
// from DSparkModel directly), draws come from the sequence's RNG at draw kDraftDraw of the draft's output position
// (same RNG and position, same drafts), and the empirical frequency of the first draft follows q_0.
TEST_F(DSparkDrafterTest, SampledDraftsAreDrawnFromTheReportedDistribution) {
    const std::int32_t n = 40;
    drafter_->observe(7, 0, 0, toks(0, n), taps(0, n));
    const auto tokens = toks(0, n + 1);
    const float temperature = 0.7f;
    const RequestRng rng(1234, 0);
    std::vector<std::int32_t> drafts, again;
    std::vector<float> q, q2;
    drafter_->propose(7, 0, tokens, kBlock, drafts, q, DraftSampling{temperature, &rng, 11});
    ASSERT_EQ(drafts.size(), std::size_t{kBlock});
    ASSERT_EQ(q.size(), std::size_t{kBlock} * kVocab);
    drafter_->propose(7, 0, tokens, kBlock, again, q2, DraftSampling{temperature, &rng, 11});
    EXPECT_EQ(again, drafts);

    // The independent expectation: block logits from the model, Markov term, softmax / T.
    const DSparkModel& m = drafter_->model();
    std::vector<float> u(kBlock * kVocab);
    {
        const auto kv = static_cast<std::size_t>(m.config().kv_dim());
        std::vector<std::vector<float>> k(kLayers, std::vector<float>(n * kv)), v = k;
        std::vector<std::uint8_t> valid(n, 1);
        std::vector<float*> kp, vp;
        for (int l = 0; l < kLayers; ++l) {
            kp.push_back(k[l].data());
            vp.push_back(v[l].data());
        }
        m.context_kv(taps_.data(), n, 0, kp, vp, n);
        DSparkContext ctx;
        ctx.count = n;
        ctx.head_stride = n;
        ctx.valid = valid.data();
        for (int l = 0; l < kLayers; ++l) ctx.layers.push_back({k[l].data(), v[l].data()});
        m.block_logits(tokens[n], n, ctx, kBlock, u.data());
    }
    std::int32_t prev = tokens[n];
    for (int j = 0; j < kBlock; ++j) {
        std::vector<double> row(u.begin() + j * kVocab, u.begin() + (j + 1) * kVocab);
        std::vector<float> markov(kVocab, 0.0f);
        m.add_markov(prev, markov.data());
        double top = -1e30, z = 0;
        for (int t = 0; t < kVocab; ++t) top = std::max(top, row[t] += markov[t]);
        for (double& x : row) z += x = std::exp((x - top) / temperature);
        double sum = 0;
        for (int t = 0; t < kVocab; ++t) {
            EXPECT_NEAR(q[j * kVocab + t], row[t] / z, 1e-5) << "draft " << j << " token " << t;
            sum += q[j * kVocab + t];
        }
        EXPECT_NEAR(sum, 1.0, 1e-4);
        EXPECT_GT(q[j * kVocab + drafts[j]], 0.0f);
        prev = drafts[j];
    }

    // Frequencies of the first draft over many random streams against q_0 (Pearson's chi-square; the streams are
    // fixed, so the outcome is too).
    std::vector<std::int64_t> counts(kVocab, 0);
    for (int i = 0; i < 4000; ++i) {
        const RequestRng r(static_cast<std::uint64_t>(i) + 1, 0);
        drafter_->propose(7, 0, tokens, 1, again, q2, DraftSampling{temperature, &r, 0});
        ++counts[again[0]];
    }
    const auto fit = testing::chi_square(counts, std::vector<double>(q.begin(), q.begin() + kVocab));
    EXPECT_GT(fit.p_value, 1e-3) << "chi-square " << fit.statistic << " with " << fit.degrees_of_freedom << " dof";

    // Temperature 0 or no RNG: greedy drafts, no q.
    drafter_->propose(7, 0, tokens, kBlock, again, q2, DraftSampling{0.0f, &rng, 11});
    EXPECT_TRUE(q2.empty());
    EXPECT_EQ(again, propose(7, 0, tokens, kBlock));
}

TEST_F(DSparkDrafterTest, ReleaseFreesStateAndMemoryIsBounded) {
    for (std::int32_t p = 0; p < 80; p += 8) drafter_->observe(7, 0, p, toks(p, 8), taps(p, 8));
    drafter_->observe(7, 1, 0, toks(0, 3), taps(0, 3));
    drafter_->observe(8, 0, 0, toks(0, 3), taps(0, 3));
    EXPECT_EQ(drafter_->num_sequences(), 3u);
    // Rows: at most (window + block) * 1.25 + 16 per sequence, 2 layers x K and V x kv_dim floats each.
    const std::size_t row_bytes = kLayers * 2 * kKvHeads * kHeadDim * sizeof(float) + 1;
    const std::size_t max_rows = (kWindow + kBlock) + (kWindow + kBlock) / 4 + 16;
    EXPECT_LE(drafter_->state_bytes(), 3 * (std::max<std::size_t>(max_rows, 64) * row_bytes + 80 * 4));
    drafter_->release(7);
    EXPECT_EQ(drafter_->num_sequences(), 1u);
    drafter_->release(8);
    EXPECT_EQ(drafter_->num_sequences(), 0u);
    EXPECT_EQ(drafter_->state_bytes(), 0u);
    // A released request drafts without context.
    EXPECT_EQ(propose(7, 0, toks(0, 41)), expected(tokens_, 40, {}));
}

TEST_F(DSparkDrafterTest, BadCallsAreErrors) {
    EXPECT_THROW(drafter_->observe(9, 0, 0, toks(0, 3), taps(0, 2)), Error);
    EXPECT_THROW(drafter_->observe(9, 0, -1, toks(0, 1), taps(0, 1)), Error);
    const std::vector<std::int32_t> bad = {1, kVocab + 5};
    EXPECT_THROW(propose(9, 0, bad), Error);
    EXPECT_TRUE(propose(9, 0, toks(0, 3), 0).empty());
}

std::string load_error(const std::string& config_extra,
                       const std::function<void(std::map<std::string, std::vector<std::int64_t>>&)>& edit = {},
                       const std::function<void(const fs::path&)>& after = {}) {
    const fs::path dir = fs::temp_directory_path() / ("dspark_bad_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    write_checkpoints(dir, config_extra, edit);
    if (after) after(dir);
    std::string message;
    try {
        DSparkModel::load((dir / "drafter").string());
    } catch (const Error& e) {
        message = e.what();
    }
    fs::remove_all(dir);
    return message;
}

// An `after` step for load_error: rewrites drafter/config.json with the first `from` replaced by `to`.
std::function<void(const fs::path&)> config_with(const std::string& from, const std::string& to) {
    return [from, to](const fs::path& d) {
        std::string text = drafter_config();
        text.replace(text.find(from), from.size(), to);
        std::ofstream(d / "drafter" / "config.json") << text;
    };
}

TEST(DSparkModelLoad, BadCheckpointsGiveClearErrors) {
    EXPECT_THAT(load_error("", [](auto& s) { s.erase("layers.1.self_attn.k_proj.weight"); }),
                HasSubstr("layers.1.self_attn.k_proj.weight"));
    EXPECT_THAT(load_error("", [](auto& s) { s["fc.weight"] = {kHidden, kHidden}; }), HasSubstr("fc.weight"));
    EXPECT_THAT(load_error("", [](auto& s) { s["norm.weight"] = {kHidden + 1}; }), HasSubstr("norm.weight"));
    EXPECT_THAT(load_error(R"(, "causal": true)"), HasSubstr("causal"));
    EXPECT_THAT(load_error("", {},
                           [](const fs::path& d) {
                               std::ofstream(d / "drafter" / "config.json") << R"({"model_type": "dspark"})";
                           }),
                HasSubstr("hidden_size is missing"));
    EXPECT_THAT(load_error("", {}, [](const fs::path& d) { std::ofstream(d / "drafter" / "config.json") << "{oops"; }),
                HasSubstr("not valid JSON"));
    EXPECT_THAT(load_error("", {}, config_with("[2, 0]", "[2, 9]")),
                HasSubstr("target layer 9 does not exist"));
    EXPECT_THAT(load_error("", {}, config_with("\"..\"", "\"../nowhere\"")),
                HasSubstr("target model directory"));
    EXPECT_THAT(load_error("", {}, config_with("\"vocab_size\": 320", "\"vocab_size\": 330")),
                HasSubstr("does not fit the target"));
    EXPECT_THAT(load_error("", {}, [](const fs::path& d) { fs::remove(d / "drafter" / "model.safetensors"); }),
                HasSubstr("model.safetensors or *.safetensors file found"));
}

}  // namespace
}  // namespace msa
