// MSA index branch: block scores against a double-precision reference (causal mask, block max), top-k rows
// (local block last, -1 padding, ties to the lower id, the keyed 16-bit ranking of msa.md section 3 and its
// 1.5-step tolerance against exact float top-k), and the batched selection driver.
#include "core/cpu_features.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/msa_indexer.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

namespace msa {
namespace {

using cpu::AttentionNumerics;
using cpu::AttentionSeq;
using cpu::TopkMode;

std::vector<std::int32_t> topk_row(const std::vector<float>& scores, int k, TopkMode mode) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(k));
    cpu::select_top_blocks(scores.data(), static_cast<std::int32_t>(scores.size()) - 1, k, mode, out.data());
    return out;
}

TEST(MsaTopk, ShortRowsSelectEveryBlockAscending) {
    EXPECT_EQ(topk_row({5.0f}, 4, TopkMode::keyed), (std::vector<std::int32_t>{0, -1, -1, -1}));
    EXPECT_EQ(topk_row({1, 9, 3}, 4, TopkMode::exact), (std::vector<std::int32_t>{0, 1, 2, -1}));
    EXPECT_EQ(topk_row({1, 9, 3, 0}, 4, TopkMode::keyed), (std::vector<std::int32_t>{0, 1, 2, 3}));
    std::int32_t out[3];
    cpu::select_top_blocks(nullptr, -1, 3, TopkMode::keyed, out);  // negative position
    EXPECT_EQ(out[0], -1);
    EXPECT_EQ(out[2], -1);
}

TEST(MsaTopk, LocalBlockLastAndTiesToLowerId) {
    // History scores with ties: blocks 1, 3, 4 tie at 7; k = 3 keeps two history blocks + local (5).
    const std::vector<float> s = {1, 7, 2, 7, 7, -100};
    for (auto mode : {TopkMode::keyed, TopkMode::exact}) {
        const auto row = topk_row(s, 3, mode);
        EXPECT_EQ(row, (std::vector<std::int32_t>{1, 3, 5})) << static_cast<int>(mode);
    }
    // The local block's own (bad) score never matters; a huge local score does not push out history.
    const std::vector<float> s2 = {3, 1, 2, 1e9f};
    EXPECT_EQ(topk_row(s2, 3, TopkMode::keyed), (std::vector<std::int32_t>{0, 2, 3}));
    // All history equal: keyed scale is 0, lowest ids win.
    const std::vector<float> s3 = {4, 4, 4, 4, 4, 0};
    EXPECT_EQ(topk_row(s3, 3, TopkMode::keyed), (std::vector<std::int32_t>{0, 1, 5}));
    // NaN ranks lowest.
    const std::vector<float> s4 = {NAN, 1, NAN, 0.5f, 9};
    EXPECT_EQ(topk_row(s4, 3, TopkMode::exact), (std::vector<std::int32_t>{1, 3, 4}));
    EXPECT_EQ(topk_row(s4, 3, TopkMode::keyed), (std::vector<std::int32_t>{1, 3, 4}));
}

TEST(MsaTopk, KeyedFollowsTheSpecFormula) {
    const std::vector<float> s = {-2.0f, 0.25f, 3.0f, 1e-3f, 3.0f};
    std::vector<std::uint32_t> keys(4);
    cpu::keyed_scores(s.data(), 4, keys.data());
    // Transcription of msa.md section 3 over the history (4 entries).
    const float mn = -2.0f, mx = 3.0f;
    const float scale = 65534.0f / (mx - mn);
    const float bias = std::fma(-mn, scale, 1.5f);
    for (std::uint32_t b = 0; b < 4; ++b) {
        const std::uint32_t q = std::min(65535u, static_cast<std::uint32_t>(std::fma(s[b], scale, bias)));
        EXPECT_EQ(keys[b], (q << 16) | (~b & 0xFFFFu)) << b;
    }
    EXPECT_EQ(keys[0] >> 16, 1u);      // the minimum maps to 1
    EXPECT_EQ(keys[2] >> 16, 65535u);  // the maximum to 65535
}

// Random rows: keyed and exact agree on the local slot and set size; every keyed pick is within 1.5 quantisation
// steps of the exact k-th history score (the tolerance MiniMax's reference test applies); exact matches a sort.
TEST(MsaTopk, KeyedWithinToleranceOfExactOnRandomRows) {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 300; ++trial) {
        const int n = 2 + static_cast<int>(rng() % 600);
        const int k = 1 + static_cast<int>(rng() % 20);
        std::vector<float> s(static_cast<std::size_t>(n));
        std::normal_distribution<float> dist(0.0f, trial % 3 == 0 ? 1e-3f : 5.0f);
        for (auto& v : s) v = dist(rng);
        if (trial % 5 == 0)
            for (auto& v : s) v = std::round(v);  // many exact ties
        const auto exact = topk_row(s, k, TopkMode::exact);
        const auto keyed = topk_row(s, k, TopkMode::keyed);
        const int local = n - 1;
        // Expected exact: sort history by (score desc, id asc).
        std::vector<int> ids(static_cast<std::size_t>(local));
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return s[a] > s[b]; });
        if (local + 1 <= k) {
            for (int i = 0; i < k; ++i) EXPECT_EQ(exact[i], i <= local ? i : -1);
            EXPECT_EQ(exact, keyed);
            continue;
        }
        std::set<int> expect(ids.begin(), ids.begin() + (k - 1));
        EXPECT_EQ(std::set<int>(exact.begin(), exact.end() - 1), expect);
        EXPECT_EQ(exact.back(), local);
        EXPECT_EQ(keyed.back(), local);
        if (k == 1) continue;  // no history slot
        const float mn = *std::min_element(s.begin(), s.end() - 1), mx = *std::max_element(s.begin(), s.end() - 1);
        const float step = (mx - mn) / 65534.0f;
        const float kth = s[ids[static_cast<std::size_t>(k - 2)]];
        std::set<int> seen;
        for (int i = 0; i + 1 < k; ++i) {
            ASSERT_GE(keyed[i], 0);
            ASSERT_LT(keyed[i], local);
            EXPECT_GE(s[keyed[i]], kth - 1.5f * step) << "trial " << trial;
            seen.insert(keyed[i]);
        }
        EXPECT_EQ(seen.size(), static_cast<std::size_t>(k - 1));
    }
}

struct IndexFixture {
    int len, groups, D;
    test::TestKvLayer layer;
    std::vector<std::int32_t> pages;
    std::vector<std::vector<float>> keys;  // exact stored values per token
    IndexFixture(int n, int g, KvCacheDtype dtype, std::uint32_t seed)
        : len(n), groups(g), D(128), layer(dtype, 1, 128, 128, (n + 127) / 128 + 1) {
        const int blocks = (n + 127) / 128;
        for (int b = 0; b < blocks; ++b) pages.push_back(blocks - b);  // reversed page table
        for (int t = 0; t < n; ++t) {
            const auto x = test::random_floats(128, seed * 131 + t, -1, 1);
            cpu::write_kv_row(layer.view.index_k(), pages[t / 128], t % 128, x.data());
            keys.push_back(test::stored_row(layer.view.index_k(), pages[t / 128], t % 128));
        }
    }
};

TEST(MsaIndexer, BlockScoresMatchReference) {
    for (bool simd : {true, false}) {
        const CpuFeatures saved = cpu_features();
        if (!simd) set_cpu_features_for_testing(CpuFeatures{});
        IndexFixture f(700, 4, KvCacheDtype::NVFP4, 1);
        const int q_len = 20;
        const auto iq = test::random_floats(static_cast<std::size_t>(q_len * 4 * 128), 2);
        const AttentionSeq seq{0, q_len, f.len, f.pages.data()};
        const std::int64_t ld = 6;
        for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
            std::vector<float> scores(static_cast<std::size_t>(q_len * 4 * ld), -7.0f);
            cpu::msa_block_scores(f.layer.view.index_k(), seq, iq.data(), 4, 0, q_len, numerics, scores.data(), ld);
            // Operands as the mode sees them: E4M3-rounded queries and keys in q8kv4 mode.
            auto q_ops = iq;
            auto k_ops = f.keys;
            if (numerics == AttentionNumerics::q8kv4) {
                for (auto& x : q_ops) x = e4m3_to_float(float_to_e4m3(x));
                for (auto& row : k_ops)
                    for (auto& x : row) x = e4m3_to_float(float_to_e4m3(x));
            }
            for (int i = 0; i < q_len; ++i) {
                const int pos = f.len - q_len + i;
                for (int g = 0; g < 4; ++g)
                    for (int b = 0; b <= pos / 128; ++b) {
                        double best = -INFINITY;
                        for (int j = b * 128; j <= std::min(pos, b * 128 + 127); ++j) {
                            double s = 0;
                            for (int d = 0; d < 128; ++d)
                                s += double(q_ops[(i * 4 + g) * 128 + d]) * k_ops[j][d];
                            best = std::max(best, s);
                        }
                        ASSERT_NEAR(scores[(i * 4 + g) * ld + b], best, 1e-4) << i << " " << g << " " << b;
                    }
            }
        }
        set_cpu_features_for_testing(saved);
    }
}

TEST(MsaIndexer, SelectionDriverMatchesPerRowTopk) {
    IndexFixture f(1100, 2, KvCacheDtype::NVFP4, 5);
    // Two sequences sharing the same pages: a decode-like chunk of 8 and a prefill chunk of 100.
    const AttentionSeq seqs[2] = {{0, 8, 1100, f.pages.data()}, {8, 100, 900, f.pages.data()}};
    const auto iq = test::random_floats(108 * 2 * 128, 6);
    cpu::MsaIndexOptions opt;
    opt.topk = 4;
    std::vector<std::int32_t> sel(108 * 2 * 4);
    cpu::msa_select_blocks(f.layer.view.index_k(), seqs, iq.data(), 2, opt, sel.data());
    // The decode chunk alone (fewer query tiles than threads: its blocks are split over threads instead).
    std::vector<std::int32_t> alone(8 * 2 * 4);
    cpu::msa_select_blocks(f.layer.view.index_k(), {seqs, 1}, iq.data(), 2, opt, alone.data());
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), sel.begin()));
    for (int s = 0; s < 2; ++s)
        for (int i = 0; i < seqs[s].q_len; ++i) {
            const int pos = cpu::query_position(seqs[s], i);
            const std::int64_t token = seqs[s].q_offset + i;
            std::vector<float> scores(static_cast<std::size_t>(2 * 9), 0.0f);
            cpu::msa_block_scores(f.layer.view.index_k(), seqs[s], iq.data(), 2, i, i + 1,
                                  AttentionNumerics::exact, scores.data(), 9);
            for (int g = 0; g < 2; ++g) {
                std::int32_t expect[4];
                cpu::select_top_blocks(scores.data() + g * 9, pos / 128, 4, TopkMode::keyed, expect);
                for (int k = 0; k < 4; ++k) ASSERT_EQ(sel[(token * 2 + g) * 4 + k], expect[k]) << s << " " << i;
            }
        }
}

}  // namespace
}  // namespace msa
