// Property: MSA's sparse path and dense attention agree bit for bit whenever top-k covers every block of the
// context (msa.md: the selection is then every block, local last, and attention over it is dense attention). Checked
// on random contexts, chunkings (prefill chunks, decode steps, verify-style steps), page assignments, KV dtypes,
// attention numerics and top-k methods, with top-k set to the context's block count or more. The sparse path's
// selections are also checked: every block 0 .. local in ascending order, then -1 padding.
#include "model/minimax_m3_model.h"
#include "model/random_checkpoint.h"
#include "support/test_configs.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include <unistd.h>

namespace msa {
namespace {

namespace fs = std::filesystem;

const fs::path& checkpoint_dir() {
    static const fs::path dir = [] {
        fs::path d = fs::temp_directory_path() / ("msa_dense_sparse_property_" + std::to_string(::getpid()));
        fs::remove_all(d);
        test::TinyConfig cfg;
        cfg.msa = {1, 0, 1};  // two MSA layers around a dense one
        RandomCheckpointSpec spec;
        spec.config_json = test::tiny_config_json(cfg);
        spec.seed = 11;
        write_random_checkpoint(d, spec);
        return d;
    }();
    return dir;
}

struct Run {
    std::vector<float> logits;  // every new token's logits, in order
    std::vector<std::vector<std::int32_t>> selections;  // per layer, concatenated over steps
    int topk = 0, groups = 0;
};

Run run(MiniMaxM3Model& m, const std::vector<std::int32_t>& tokens, const std::vector<int>& chunks,
        const std::vector<std::int32_t>& pages) {
    Run r;
    int past = 0;
    for (int n : chunks) {
        ForwardBatch batch;
        batch.seqs.push_back({std::span<const std::int32_t>(tokens.data() + past, static_cast<std::size_t>(n)), past,
                              pages, n});
        ForwardOutput out;
        ForwardTrace trace;
        trace.record_selected_blocks = true;
        m.forward(batch, {}, out, &trace);
        r.logits.insert(r.logits.end(), out.logits.begin(), out.logits.end());
        r.selections.resize(trace.selected_blocks.size());
        for (std::size_t l = 0; l < trace.selected_blocks.size(); ++l)
            r.selections[l].insert(r.selections[l].end(), trace.selected_blocks[l].begin(),
                                   trace.selected_blocks[l].end());
        r.topk = trace.topk;
        r.groups = trace.num_kv_heads;
        past += n;
    }
    return r;
}

RC_GTEST_PROP(DenseSparseProperty, SparseEqualsDenseWhenTopkCoversEveryBlock, ()) {
    const int n = *rc::gen::inRange(1, 521);  // up to 5 blocks
    const int blocks = (n + 127) / 128;
    const int topk = blocks + *rc::gen::inRange(0, 3);
    const auto numerics = *rc::gen::element(AttentionNumerics::exact, AttentionNumerics::q8kv4);
    const auto kv = *rc::gen::element(KvCacheDtype::NVFP4, KvCacheDtype::FP8, KvCacheDtype::BF16);
    const auto topk_mode = *rc::gen::element(TopkMode::keyed, TopkMode::exact);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();

    std::mt19937 rng(seed);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % 320);
    // Chunks: a prefill part split at random points, then steps of 1..8 tokens.
    std::vector<int> chunks;
    const int prefill = std::uniform_int_distribution<int>(1, n)(rng);
    for (int done = 0; done < prefill;) {
        const int c = std::min(prefill - done, std::uniform_int_distribution<int>(1, 300)(rng));
        chunks.push_back(c);
        done += c;
    }
    for (int done = prefill; done < n;) {
        const int c = std::min(n - done, std::uniform_int_distribution<int>(1, 8)(rng));
        chunks.push_back(c);
        done += c;
    }
    std::vector<std::int32_t> pages(8);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    pages.resize(static_cast<std::size_t>(blocks));

    ModelOptions o;
    o.num_kv_pages = 8;
    o.kv_cache_dtype = kv;
    o.attention_numerics = numerics;
    o.topk_mode = topk_mode;
    o.activations = ActivationMode::exact;
    o.topk_blocks = topk;
    auto sparse = MiniMaxM3Model::load(checkpoint_dir().string(), o);
    o.dense_attention = true;
    auto dense = MiniMaxM3Model::load(checkpoint_dir().string(), o);

    const Run rs = run(*sparse, tokens, chunks, pages);
    const Run rd = run(*dense, tokens, chunks, pages);
    RC_ASSERT(rs.logits.size() == static_cast<std::size_t>(n) * 320u);
    RC_ASSERT(rs.logits.size() == rd.logits.size());
    RC_ASSERT(std::memcmp(rs.logits.data(), rd.logits.data(), rs.logits.size() * sizeof(float)) == 0);

    // The sparse path really ran MSA (layers 0 and 2) and selected every block, local last.
    RC_ASSERT(rs.topk == topk);
    for (int layer : {0, 2}) {
        const auto& sel = rs.selections[static_cast<std::size_t>(layer)];
        RC_ASSERT(sel.size() == static_cast<std::size_t>(n) * static_cast<std::size_t>(rs.groups * topk));
        for (int t = 0; t < n; ++t)
            for (int g = 0; g < rs.groups; ++g) {
                const std::int32_t* row = sel.data() + (static_cast<std::size_t>(t) * rs.groups + g) * topk;
                for (int s = 0; s < topk; ++s) RC_ASSERT(row[s] == (s <= t / 128 ? s : -1));
            }
    }
    RC_ASSERT(rs.selections[1].empty());
}

}  // namespace
}  // namespace msa
