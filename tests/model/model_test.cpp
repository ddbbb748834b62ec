// The forward pass on random checkpoints of small configs, through the real loading path (config.json + sharded
// safetensors): properties the engine relies on, checked bit for bit:
//  - decode after prefill, and chunked prefill, equal one long prefill;
//  - a sequence's logits do not depend on the other sequences of the batch or on its page numbers;
//  - MSA layers equal dense attention when top-k covers every block;
// plus selection traces, hidden-state taps and errors for malformed batches.
#include "core/error.h"
#include "model/minimax_m3_model.h"
#include "model/random_checkpoint.h"
#include "support/test_configs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>

#include <unistd.h>

namespace msa {
namespace {

namespace fs = std::filesystem;

fs::path make_checkpoint(const std::string& name, const test::TinyConfig& cfg, LinearFormat attn, LinearFormat mlp,
                         LinearFormat experts) {
    // One directory per process: ctest runs the tests of this file as parallel processes that share names.
    const fs::path dir = fs::temp_directory_path() / ("msa_model_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    RandomCheckpointSpec spec;
    spec.config_json = test::tiny_config_json(cfg);
    spec.attention_format = attn;
    spec.mlp_format = mlp;
    spec.expert_format = experts;
    spec.seed = 7;
    spec.max_shard_bytes = 1 << 20;  // several shards
    write_random_checkpoint(dir, spec);
    return dir;
}

std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(vocab));
    return t;
}

// Runs [past, past + n) of `tokens` as one step of one sequence with `num_logits` logits.
std::vector<float> step(MiniMaxM3Model& m, const std::vector<std::int32_t>& tokens, int past, int n,
                        const std::vector<std::int32_t>& pages, int num_logits, ForwardTrace* trace = nullptr) {
    ForwardBatch batch;
    SequenceStep s;
    s.tokens = std::span<const std::int32_t>(tokens.data() + past, static_cast<std::size_t>(n));
    s.past_len = past;
    s.pages = pages;
    s.num_logits = num_logits;
    batch.seqs.push_back(s);
    ForwardOutput out;
    m.forward(batch, {}, out, trace);
    return out.logits;
}

std::vector<std::int32_t> iota_pages(int first, int n) {
    std::vector<std::int32_t> p(static_cast<std::size_t>(n));
    std::iota(p.begin(), p.end(), first);
    return p;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
    return std::memcmp(a, b, n * sizeof(float)) == 0;
}

class ModelTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new fs::path(
            make_checkpoint("mix", test::TinyConfig{}, LinearFormat::bf16, LinearFormat::bf16, LinearFormat::bf16));
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir_);
        delete dir_;
    }
    static std::unique_ptr<MiniMaxM3Model> load(ModelOptions o = {}) {
        o.num_kv_pages = 24;
        o.activations = ActivationMode::exact;
        return MiniMaxM3Model::load(dir_->string(), o);
    }
    static fs::path* dir_;
};
fs::path* ModelTest::dir_ = nullptr;

TEST_F(ModelTest, LoadsAndProducesFiniteLogits) {
    auto m = load();
    EXPECT_EQ(m->vocab_size(), 320);
    EXPECT_EQ(m->num_kv_pages(), 24);
    EXPECT_EQ(m->kv_dtype(), KvCacheDtype::NVFP4);  // from quantization_config.kv_cache_quant_algo
    const auto tokens = random_tokens(300, 320, 1);
    const auto logits = step(*m, tokens, 0, 300, iota_pages(0, 3), 2);
    ASSERT_EQ(logits.size(), 2u * 320u);
    float spread = 0;
    for (float x : logits) {
        ASSERT_TRUE(std::isfinite(x));
        spread = std::max(spread, std::fabs(x - logits[0]));
    }
    EXPECT_GT(spread, 1e-3f);
}

TEST_F(ModelTest, DecodeAndChunkedPrefillEqualOneLongPrefill) {
    for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
        ModelOptions o;
        o.attention_numerics = numerics;
        auto m = load(o);
        const int n = 520;  // 5 blocks: top-k 3 is really sparse at the end
        const auto tokens = random_tokens(n, 320, 2);
        const auto pages = iota_pages(0, 5);
        const auto full = step(*m, tokens, 0, n, pages, 12);  // logits of positions n-12 .. n-1
        // Prefill in chunks of 200 and 190 (crossing pages), then decode 1 token, then a verify-style step of 8,
        // then 3 single decodes, into different pages.
        const auto pages2 = iota_pages(10, 5);
        step(*m, tokens, 0, 200, pages2, 0);
        step(*m, tokens, 200, 190, pages2, 1);
        std::vector<float> tail;
        step(*m, tokens, 390, 118, pages2, 0);
        for (int past : {508}) {
            const auto one = step(*m, tokens, past, 1, pages2, 1);
            tail.insert(tail.end(), one.begin(), one.end());
        }
        const auto verify = step(*m, tokens, 509, 8, pages2, 8);
        tail.insert(tail.end(), verify.begin(), verify.end());
        for (int past : {517, 518, 519}) {
            const auto one = step(*m, tokens, past, 1, pages2, 1);
            tail.insert(tail.end(), one.begin(), one.end());
        }
        ASSERT_EQ(tail.size(), full.size());
        EXPECT_TRUE(same_bits(tail.data(), full.data(), full.size())) << "numerics " << static_cast<int>(numerics);
    }
}

TEST_F(ModelTest, BatchCompositionDoesNotChangeResults) {
    auto m = load();
    const auto a = random_tokens(300, 320, 3), b = random_tokens(41, 320, 4), c = random_tokens(140, 320, 5);
    // Alone.
    const auto la = step(*m, a, 0, 300, iota_pages(0, 3), 3);
    const auto lb = step(*m, b, 0, 41, iota_pages(3, 1), 1);
    const auto lc = step(*m, c, 0, 140, iota_pages(4, 2), 2);
    // Together, in another order, on other pages.
    const auto pa = iota_pages(8, 3), pb = iota_pages(20, 1), pc = iota_pages(12, 2);
    ForwardBatch batch;
    batch.seqs.push_back({c, 0, pc, 2});
    batch.seqs.push_back({a, 0, pa, 3});
    batch.seqs.push_back({b, 0, pb, 1});
    ForwardOutput out;
    m->forward(batch, {}, out);
    ASSERT_EQ(out.logits.size(), 6u * 320u);
    EXPECT_TRUE(same_bits(out.logits.data(), lc.data(), lc.size()));
    EXPECT_TRUE(same_bits(out.logits.data() + 2 * 320, la.data(), la.size()));
    EXPECT_TRUE(same_bits(out.logits.data() + 5 * 320, lb.data(), lb.size()));
}

TEST_F(ModelTest, MsaEqualsDenseWhenTopkCoversEveryBlock) {
    // top-k 3 covers every block up to 384 tokens.
    auto sparse = load();
    ModelOptions d;
    d.dense_attention = true;
    auto dense = load(d);
    const auto tokens = random_tokens(384, 320, 6);
    const auto ls = step(*sparse, tokens, 0, 384, iota_pages(0, 3), 5);
    const auto ld = step(*dense, tokens, 0, 384, iota_pages(0, 3), 5);
    EXPECT_TRUE(same_bits(ls.data(), ld.data(), ls.size()));
    // Beyond that, sparsity changes the result.
    const auto t2 = random_tokens(700, 320, 7);
    const auto s2 = step(*sparse, t2, 0, 700, iota_pages(0, 6), 1);
    const auto d2 = step(*dense, t2, 0, 700, iota_pages(0, 6), 1);
    EXPECT_FALSE(same_bits(s2.data(), d2.data(), s2.size()));
}

TEST_F(ModelTest, TraceRecordsSelectedBlocksLocalLast) {
    auto m = load();
    const auto tokens = random_tokens(650, 320, 8);
    ForwardTrace trace;
    trace.record_selected_blocks = true;
    step(*m, tokens, 0, 650, iota_pages(0, 6), 1, &trace);
    ASSERT_EQ(trace.selected_blocks.size(), 3u);
    EXPECT_TRUE(trace.selected_blocks[0].empty());  // layer 0 is dense
    EXPECT_EQ(trace.topk, 3);
    for (int l : {1, 2}) {
        const auto& sel = trace.selected_blocks[static_cast<std::size_t>(l)];
        ASSERT_EQ(sel.size(), 650u * 2u * 3u);
        for (int t = 0; t < 650; ++t)
            for (int g = 0; g < 2; ++g) {
                const std::int32_t* row = sel.data() + (t * 2 + g) * 3;
                const int local = t / 128;
                if (local + 1 <= 3) {
                    for (int s = 0; s < 3; ++s) ASSERT_EQ(row[s], s <= local ? s : -1);
                } else {
                    ASSERT_EQ(row[2], local);
                    ASSERT_TRUE(row[0] < row[1] && row[1] < local && row[0] >= 0);
                }
            }
    }
}

TEST_F(ModelTest, HiddenTapsAreTheResidualStream) {
    auto m = load();
    const auto tokens = random_tokens(20, 320, 9);
    const auto pages = iota_pages(0, 1);  // the step's spans must outlive it
    ForwardBatch batch;
    batch.seqs.push_back({tokens, 0, pages, 1});
    ForwardOptions opt;
    opt.tap_layers = {2, 0};
    ForwardOutput out;
    m->forward(batch, opt, out);
    ASSERT_EQ(out.hidden_taps.size(), 2u * 20u * 128u);
    // Tapping changes nothing else, and a token's tap does not depend on later tokens.
    ForwardOutput out2;
    batch.seqs[0].tokens = std::span<const std::int32_t>(tokens.data(), 10);
    batch.seqs[0].num_logits = 0;
    m->forward(batch, opt, out2);
    EXPECT_TRUE(same_bits(out2.hidden_taps.data(), out.hidden_taps.data(), 10 * 128));
    EXPECT_TRUE(same_bits(out2.hidden_taps.data() + 10 * 128, out.hidden_taps.data() + 20 * 128, 10 * 128));
}

TEST_F(ModelTest, MalformedBatchesGiveClearErrors) {
    auto m = load();
    const std::vector<std::int32_t> tokens = {1, 2, 3};
    const std::vector<std::int32_t> bad_token = {1, 999};
    const auto pages = iota_pages(0, 1);
    auto expect_error = [&](SequenceStep s, const std::string& fragment) {
        ForwardBatch batch;
        batch.seqs.push_back(s);
        ForwardOutput out;
        try {
            m->forward(batch, {}, out);
            ADD_FAILURE() << "no error for " << fragment;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    expect_error({bad_token, 0, pages, 1}, "token id 999");
    expect_error({tokens, 127, pages, 1}, "pages");  // 130 tokens need 2 pages
    expect_error({tokens, 0, std::vector<std::int32_t>{24}, 1}, "KV page 24");
    expect_error({tokens, 0, pages, 4}, "logits");
    expect_error({tokens, -1, pages, 1}, "negative");
}

// Every weight format loads and runs: MXFP8 attention/MLP, NVFP4 experts with and without W4A4, FP8 and BF16 KV.
TEST(ModelFormats, QuantisedCheckpointsRun) {
    struct Case {
        const char* name;
        LinearFormat attn, mlp, experts;
        bool w4a4;
        std::string kv;
    };
    const Case cases[] = {
        {"mxfp8", LinearFormat::mxfp8, LinearFormat::mxfp8, LinearFormat::mxfp8, false, "FP8"},
        {"nvfp4", LinearFormat::mxfp8, LinearFormat::nvfp4, LinearFormat::nvfp4, false, ""},
        {"w4a4", LinearFormat::mxfp8, LinearFormat::mxfp8, LinearFormat::nvfp4, true, "NVFP4"},
    };
    for (const Case& c : cases) {
        test::TinyConfig cfg;
        cfg.msa = {1, 1, 1};
        cfg.kv_cache_quant_algo = c.kv;
        cfg.w4a4 = c.w4a4;
        const auto dir = make_checkpoint(c.name, cfg, c.attn, c.mlp, c.experts);
        for (auto act : {ActivationMode::exact, ActivationMode::int8}) {
            ModelOptions o;
            o.num_kv_pages = 4;
            o.activations = act;
            auto m = MiniMaxM3Model::load(dir.string(), o);
            const auto tokens = random_tokens(200, 320, 10);
            const auto logits = step(*m, tokens, 0, 200, iota_pages(0, 2), 1);
            for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << c.name;
        }
        fs::remove_all(dir);
    }
}

// MiniMaxM3Model::load reads shards of 4 MiB and more into transparent huge pages (unless MSA_WEIGHTS_HUGE_PAGES=0
// or the machine has none): the same bytes, so the same logits, bit for bit, as the weights mapped from the file.
TEST(ModelLoad, WeightsInHugePagesGiveTheSameLogitsBitForBit) {
    test::TinyConfig cfg;
    cfg.vocab = 8192;  // embedding + lm_head 4 MiB in BF16: one shard above the 4 MiB threshold
    cfg.w4a4 = true;
    const fs::path dir = fs::temp_directory_path() / ("msa_model_test_huge_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    RandomCheckpointSpec spec;
    spec.config_json = test::tiny_config_json(cfg);
    spec.attention_format = LinearFormat::mxfp8;
    spec.mlp_format = LinearFormat::mxfp8;
    spec.expert_format = LinearFormat::nvfp4;
    spec.seed = 11;
    spec.max_shard_bytes = std::uint64_t{64} << 20;
    write_random_checkpoint(dir, spec);
    std::uint64_t largest = 0;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".safetensors") largest = std::max<std::uint64_t>(largest, entry.file_size());
    ASSERT_GE(largest, std::uint64_t{4} << 20);
    const auto tokens = random_tokens(140, cfg.vocab, 12);
    std::vector<float> logits[2];
    for (int huge = 0; huge < 2; ++huge) {
        if (huge == 0) {
            ::setenv("MSA_WEIGHTS_HUGE_PAGES", "0", 1);
        } else {
            ::unsetenv("MSA_WEIGHTS_HUGE_PAGES");
        }
        ModelOptions o;
        o.num_kv_pages = 3;
        o.activations = ActivationMode::int8;
        auto m = MiniMaxM3Model::load(dir.string(), o);
        const auto pages = iota_pages(0, 2);
        auto prefill = step(*m, tokens, 0, 138, pages, 3);
        const auto decode = step(*m, tokens, 138, 2, pages, 2);
        prefill.insert(prefill.end(), decode.begin(), decode.end());
        logits[huge] = std::move(prefill);
    }
    ::unsetenv("MSA_WEIGHTS_HUGE_PAGES");
    ASSERT_EQ(logits[0].size(), 5u * 8192u);
    ASSERT_EQ(logits[1].size(), logits[0].size());
    EXPECT_TRUE(same_bits(logits[0].data(), logits[1].data(), logits[0].size()));
    fs::remove_all(dir);
}

}  // namespace
}  // namespace msa
