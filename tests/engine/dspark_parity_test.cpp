// Parity of the C++ DSpark drafter with the PyTorch definition (tools/train/drafter.py) on the shipped default model:
// the golden file of tools/train/dspark_golden.py (made by a ctest fixture) holds a token sequence, the target's taps
// over it (PyTorch), and at several anchors the greedy drafts and the logits they were chosen from, for the config's
// sliding window and a small one. Checked here:
//  - the drafter in isolation on the Python taps: logits within 1e-3 of the logit scale, drafts equal;
//  - DSparkDrafter fed the same taps through observe() in uneven chunks, with rejected drafts in between: same drafts;
//  - the C++ target's own taps (MiniMaxM3Model, exact numerics) against the Python taps (RMS within 2%), and that they
//    give the same drafts.
#include "engine/dspark_drafter.h"
#include "formats/safetensors_reader.h"
#include "model/dspark_model.h"
#include "model/minimax_m3_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace msa {
namespace {

namespace fs = std::filesystem;

const fs::path kModelDir = fs::path(MSA_SOURCE_DIR) / "models" / "default";

struct Golden {
    std::unique_ptr<SafetensorsFile> file;
    std::vector<std::int32_t> tokens, anchors;
    std::vector<float> taps;
    std::vector<int> windows;
};

template <typename T>
std::vector<T> tensor(const SafetensorsFile& f, const std::string& name) {
    const auto s = f.get(name).as<T>();
    return {s.begin(), s.end()};
}

Golden load_golden() {
    const char* path = std::getenv("MSA_DSPARK_GOLDEN");
    if (path == nullptr) return {};
    Golden g;
    g.file = std::make_unique<SafetensorsFile>(path);
    g.tokens = tensor<std::int32_t>(*g.file, "tokens");
    g.anchors = tensor<std::int32_t>(*g.file, "anchors");
    g.taps = tensor<float>(*g.file, "taps");
    std::stringstream windows(g.file->metadata().at("windows"));
    for (std::string w; std::getline(windows, w, ',');) g.windows.push_back(std::stoi(w));
    return g;
}

class DSparkParity : public ::testing::Test {
protected:
    void SetUp() override {
        golden_ = load_golden();
        if (!golden_.file) GTEST_SKIP() << "MSA_DSPARK_GOLDEN is not set (the ctest fixture makes the golden file)";
    }
    Golden golden_;
};

// Drafts at every golden anchor from the model alone, given taps [T][tap_width]; logits into `logits` when given.
std::vector<std::vector<std::int32_t>> model_drafts(const DSparkModel& m, const Golden& g,
                                                    const std::vector<float>& taps, std::vector<float>* logits) {
    const DSparkConfig& c = m.config();
    const auto T = static_cast<std::int64_t>(g.tokens.size());
    const auto kv = static_cast<std::size_t>(c.kv_dim());
    std::vector<std::vector<float>> k(c.num_hidden_layers, std::vector<float>(T * kv)),
        v(c.num_hidden_layers, std::vector<float>(T * kv));
    std::vector<float*> kp, vp;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        kp.push_back(k[l].data());
        vp.push_back(v[l].data());
    }
    m.context_kv(taps.data(), T, 0, kp, vp, T);
    const std::vector<std::uint8_t> valid(static_cast<std::size_t>(T), 1);
    std::vector<std::vector<std::int32_t>> out;
    const auto V = static_cast<std::size_t>(c.vocab_size);
    for (std::size_t a = 0; a < g.anchors.size(); ++a) {
        const std::int32_t n = g.anchors[a];
        DSparkContext ctx;
        ctx.first_position = 0;
        ctx.count = n;  // the context is [0, n): rows at and after the anchor are not passed
        ctx.head_stride = T;
        ctx.valid = valid.data();
        for (int l = 0; l < c.num_hidden_layers; ++l) ctx.layers.push_back({k[l].data(), v[l].data()});
        std::vector<float> u(c.block_size * V);
        m.block_logits(g.tokens[n], n, ctx, c.block_size, u.data());
        std::vector<std::int32_t> drafts;
        m.greedy_drafts(u.data(), g.tokens[n], c.block_size, drafts,
                        logits != nullptr ? logits->data() + a * c.block_size * V : nullptr);
        out.push_back(drafts);
    }
    return out;
}

TEST_F(DSparkParity, IsolatedDrafterMatchesPyTorch) {
    for (const int w : golden_.windows) {
        SCOPED_TRACE("sliding window " + std::to_string(w));
        const auto m = DSparkModel::load((kModelDir / "drafter").string(), {.sliding_window = w});
        const auto want_logits = tensor<float>(*golden_.file, "logits_w" + std::to_string(w));
        const auto want_drafts = tensor<std::int32_t>(*golden_.file, "drafts_w" + std::to_string(w));
        std::vector<float> logits(want_logits.size());
        const auto drafts = model_drafts(*m, golden_, golden_.taps, &logits);
        float scale = 0.0f, err = 0.0f;
        for (std::size_t i = 0; i < logits.size(); ++i) {
            scale = std::max(scale, std::abs(want_logits[i]));
            err = std::max(err, std::abs(logits[i] - want_logits[i]));
        }
        RecordProperty("max_abs_logit_error_w" + std::to_string(w), std::to_string(err));
        std::printf("window %d: max |logit error| %.3g, logit scale %.3g\n", w, err, scale);
        EXPECT_LT(err, 1e-3f * scale);
        const int B = m->config().block_size;
        for (std::size_t a = 0; a < drafts.size(); ++a) {
            const std::vector<std::int32_t> want(want_drafts.begin() + a * B, want_drafts.begin() + (a + 1) * B);
            EXPECT_EQ(drafts[a], want) << "anchor " << golden_.anchors[a];
        }
    }
}

TEST_F(DSparkParity, DrafterStateFromObservationsMatchesPyTorch) {
    for (const int w : golden_.windows) {
        SCOPED_TRACE("sliding window " + std::to_string(w));
        auto drafter = load_dspark_drafter((kModelDir / "drafter").string(), {.sliding_window = w});
        const DSparkConfig& c = drafter->model().config();
        const auto want_drafts = tensor<std::int32_t>(*golden_.file, "drafts_w" + std::to_string(w));
        const auto width = static_cast<std::size_t>(c.tap_width());
        const auto T = static_cast<std::int32_t>(golden_.tokens.size());
        std::vector<std::int32_t> drafts;
        std::vector<float> probs;
        // One request per anchor: the context is observed in uneven chunks, and the chunk observed last runs past the
        // anchor with garbage (a verify step's rejected drafts), which propose must drop.
        for (std::size_t a = 0; a < golden_.anchors.size(); ++a) {
            const std::int32_t n = golden_.anchors[a];
            std::int32_t p = 0;
            for (int chunk = 5; p < n; chunk = chunk * 2 + 1) {
                const std::int32_t end = std::min(n, p + chunk);
                drafter->observe(a, 0, p, std::span(golden_.tokens).subspan(p, end - p),
                                 std::span(golden_.taps).subspan(p * width, (end - p) * width));
                p = end;
            }
            const std::int32_t extra = std::min(4, T - n);
            std::vector<float> junk(extra * width, 3.0f);
            drafter->observe(a, 0, n, std::span(golden_.tokens).subspan(n, extra), junk);
            drafter->propose(a, 0, std::span(golden_.tokens).first(n + 1), c.block_size, drafts, probs);
            EXPECT_TRUE(probs.empty());
            const std::vector<std::int32_t> want(want_drafts.begin() + a * c.block_size,
                                                 want_drafts.begin() + (a + 1) * c.block_size);
            EXPECT_EQ(drafts, want) << "anchor " << n;
            // Fewer drafts are the first ones of the block.
            drafter->propose(a, 0, std::span(golden_.tokens).first(n + 1), 3, drafts, probs);
            EXPECT_EQ(drafts, std::vector<std::int32_t>(want.begin(), want.begin() + 3));
        }
    }
}

TEST_F(DSparkParity, CppTargetTapsDriveTheSameDrafts) {
    const auto drafter = DSparkModel::load((kModelDir / "drafter").string());
    const DSparkConfig& c = drafter->config();
    ModelOptions o;
    o.activations = ActivationMode::exact;
    o.attention_numerics = AttentionNumerics::exact;
    o.topk_mode = TopkMode::exact;  // model.py ranks blocks by float scores
    o.num_kv_pages = 4;
    auto target = MiniMaxM3Model::load(kModelDir.string(), o);
    const auto T = static_cast<std::int64_t>(golden_.tokens.size());
    ForwardBatch batch;
    const std::vector<std::int32_t> pages = {0, 1, 2, 3};
    batch.seqs.push_back({golden_.tokens, 0, pages, 1});
    ForwardOptions fo;
    fo.tap_layers = c.target_layer_ids;
    ForwardOutput out;
    target->forward(batch, fo, out);
    // [num_taps][T][hidden] -> [T][num_taps * hidden]
    const auto H = static_cast<std::size_t>(c.hidden_size);
    const std::size_t ntaps = c.target_layer_ids.size();
    std::vector<float> taps(static_cast<std::size_t>(T) * ntaps * H);
    for (std::size_t t = 0; t < ntaps; ++t) {
        for (std::int64_t i = 0; i < T; ++i) {
            std::copy_n(out.hidden_taps.data() + (t * T + i) * H, H, taps.data() + (i * ntaps + t) * H);
        }
    }
    float scale = 0.0f, err = 0.0f;
    double sq = 0, sq_err = 0;
    for (std::size_t i = 0; i < taps.size(); ++i) {
        scale = std::max(scale, std::abs(golden_.taps[i]));
        err = std::max(err, std::abs(taps[i] - golden_.taps[i]));
        sq += double(golden_.taps[i]) * golden_.taps[i];
        sq_err += double(taps[i] - golden_.taps[i]) * (taps[i] - golden_.taps[i]);
    }
    std::printf("C++ target taps: max |error| %.3g, scale %.3g, rms rel %.3g\n", err, scale, std::sqrt(sq_err / sq));
    // On these tokens the C++ target's taps equal model.py's (and tools/reference's, which agrees with model.py to
    // 7e-6) except at 13 of 72 positions in the MoE layers (3 and 4), by up to 0.12 of a scale of 8: most likely W4A4's
    // NVFP4 activation rounding, where an FP32-rounding difference flips a 4-bit value. So the taps are compared in
    // RMS (0.5% measured); the drafts they give must still be equal.
    EXPECT_LT(std::sqrt(sq_err / sq), 0.02);
    const auto drafts = model_drafts(*drafter, golden_, taps, nullptr);
    const auto want = tensor<std::int32_t>(*golden_.file, "drafts_w" + std::to_string(c.sliding_window));
    for (std::size_t a = 0; a < drafts.size(); ++a) {
        EXPECT_EQ(drafts[a],
                  std::vector<std::int32_t>(want.begin() + a * c.block_size, want.begin() + (a + 1) * c.block_size))
            << "anchor " << golden_.anchors[a];
    }
}

}  // namespace
}  // namespace msa
