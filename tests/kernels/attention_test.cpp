// Dense and sparse attention on paged KV against a double-precision reference written here (exact mode) and a
// straightforward transcription of msa.md section 5 (Q8KV4 mode); plus the properties the engine relies on:
// dense == sparse when the selection covers every block, and results independent of how queries are batched.
#include "kernels/cpu/attention.h"
#include "core/cpu_features.h"
#include "core/parallel.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/kv_rows.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace msa {
namespace {

using cpu::AttentionNumerics;
using cpu::AttentionSeq;

struct Fixture {
    int H, Hkv, D;
    int kv_len;
    KvCacheDtype dtype;
    test::TestKvLayer layer;
    std::vector<std::int32_t> pages;
    Fixture(int heads, int kv_heads, int dim, int len, KvCacheDtype dt, std::uint32_t seed)
        : H(heads), Hkv(kv_heads), D(dim), kv_len(len), dtype(dt),
          layer(dt, kv_heads, dim, dim, (len + 127) / 128 + 3) {
        // A scrambled page table: logical block b lives in physical page pages[b].
        const int blocks = (len + 127) / 128;
        pages.resize(static_cast<std::size_t>(blocks));
        std::iota(pages.begin(), pages.end(), 0);
        std::mt19937 rng(seed);
        std::shuffle(pages.begin(), pages.end(), rng);
        for (auto& p : pages) p += 2;  // leave pages 0-1 unused (poisoned)
        for (int t = 0; t < len; ++t)
            for (int g = 0; g < kv_heads; ++g) {
                auto k = test::random_floats(static_cast<std::size_t>(dim), seed * 7919 + t * 31 + g, -2, 2);
                auto v = test::random_floats(static_cast<std::size_t>(dim), seed * 7919 + t * 31 + g + 17, -2, 2);
                cpu::write_kv_row(layer.view.k(g), pages[t / 128], t % 128, k.data());
                cpu::write_kv_row(layer.view.v(g), pages[t / 128], t % 128, v.data());
            }
        cache_rows();
    }
    // Stored values dequantised once with the formats library, and their E4M3 roundings (Q8KV4 reference).
    std::vector<std::vector<float>> keys, values, keys8, values8;  // [g * len + t][D]
    void cache_rows() {
        auto e4m3 = [](float x) { return e4m3_to_float(float_to_e4m3(x)); };
        for (int g = 0; g < Hkv; ++g)
            for (int t = 0; t < kv_len; ++t) {
                keys.push_back(test::stored_row(layer.view.k(g), pages[t / 128], t % 128));
                values.push_back(test::stored_row(layer.view.v(g), pages[t / 128], t % 128));
                keys8.push_back(keys.back());
                values8.push_back(values.back());
                for (auto& x : keys8.back()) x = e4m3(x);
                for (auto& x : values8.back()) x = e4m3(x);
            }
    }
    const std::vector<float>& key(int g, int t) const { return keys[static_cast<std::size_t>(g * kv_len + t)]; }
    const std::vector<float>& value(int g, int t) const { return values[static_cast<std::size_t>(g * kv_len + t)]; }
    const std::vector<float>& key8(int g, int t) const { return keys8[static_cast<std::size_t>(g * kv_len + t)]; }
    const std::vector<float>& value8(int g, int t) const {
        return values8[static_cast<std::size_t>(g * kv_len + t)];
    }
    cpu::AttentionShape shape() const { return {H, Hkv, D, 1.0f / std::sqrt(static_cast<float>(D))}; }
};

// Exact reference for one query row: attention of head h at position pos over the given blocks.
std::vector<double> reference_exact(const Fixture& f, const float* q, int h, int pos, const std::vector<int>& blocks) {
    const int g = h / (f.H / f.Hkv);
    std::vector<double> logits;
    std::vector<int> keys;
    for (int b : blocks)
        for (int j = b * 128; j < std::min(b * 128 + 128, pos + 1); ++j) {
            const auto& k = f.key(g, j);
            double s = 0;
            for (int d = 0; d < f.D; ++d) s += double(q[d]) * k[d];
            logits.push_back(s / std::sqrt(double(f.D)));
            keys.push_back(j);
        }
    const double mx = *std::max_element(logits.begin(), logits.end());
    double den = 0;
    for (auto& l : logits) den += (l = std::exp(l - mx));
    std::vector<double> out(static_cast<std::size_t>(f.D), 0.0);
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto& v = f.value(g, keys[i]);
        for (int d = 0; d < f.D; ++d) out[d] += logits[i] / den * v[d];
    }
    return out;
}

// msa.md section 5's Q8KV4 contract with P taken against the row's max over all its selected keys (the engine's
// and the Python reference's choice): E4M3 Q, E4M3(P * 448) times V / 448, FP32 sum of the unquantised P.
std::vector<double> reference_q8kv4(const Fixture& f, const float* q, int h, int pos, const std::vector<int>& blocks) {
    const int g = h / (f.H / f.Hkv);
    auto e4m3 = [](float x) { return e4m3_to_float(float_to_e4m3(x)); };
    std::vector<float> q8(static_cast<std::size_t>(f.D));
    for (int d = 0; d < f.D; ++d) q8[d] = e4m3(q[d]);
    std::vector<float> s;
    std::vector<int> keys;
    for (int b : blocks) {
        for (int j = b * 128; j < std::min(b * 128 + 128, pos + 1); ++j) {
            const auto& k = f.key8(g, j);
            float dot = 0;
            for (int d = 0; d < f.D; ++d) dot += q8[d] * k[d];
            s.push_back(dot / std::sqrt(float(f.D)));
            keys.push_back(j);
        }
    }
    const double m = *std::max_element(s.begin(), s.end());
    std::vector<double> acc(static_cast<std::size_t>(f.D), 0.0);
    double l = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const float p = static_cast<float>(std::exp(s[i] - m));
        l += p;
        const float pq = e4m3(p * 448.0f);
        const auto& v = f.value8(g, keys[i]);
        for (int d = 0; d < f.D; ++d) acc[d] += double(pq) * v[d] / 448.0;
    }
    for (auto& a : acc) a /= l;
    return acc;
}

struct AttentionCase {
    int H, Hkv;
    int kv_len;
    KvCacheDtype dtype;
};

class AttentionTest : public ::testing::TestWithParam<std::tuple<AttentionCase, bool>> {
protected:
    test::ScopedCpuFeatures mode_{std::get<1>(GetParam())};
};

TEST_P(AttentionTest, DenseMatchesReference) {
    const auto c = std::get<0>(GetParam());
    Fixture f(c.H, c.Hkv, 128, c.kv_len, c.dtype, 3);
    const int q_len = 5;  // the last positions: a chunk crossing a block boundary when kv_len allows it
    const auto q = test::random_floats(static_cast<std::size_t>(q_len * c.H * 128), 5, -1.5f, 1.5f);
    const AttentionSeq seq{0, q_len, c.kv_len, f.pages.data()};
    for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
        std::vector<float> out(q.size());
        cpu::dense_attention(f.layer.view, {&seq, 1}, q.data(), f.shape(), numerics, out.data());
        for (int i = 0; i < q_len; ++i) {
            const int pos = c.kv_len - q_len + i;
            std::vector<int> blocks(static_cast<std::size_t>(pos / 128 + 1));
            std::iota(blocks.begin(), blocks.end(), 0);
            for (int h = 0; h < c.H; ++h) {
                const float* qh = q.data() + (i * c.H + h) * 128;
                const auto ref = numerics == AttentionNumerics::exact ? reference_exact(f, qh, h, pos, blocks)
                                                                      : reference_q8kv4(f, qh, h, pos, blocks);
                const double tol = numerics == AttentionNumerics::exact ? 2e-5 : 2e-3;
                for (int d = 0; d < 128; ++d)
                    ASSERT_NEAR(out[(i * c.H + h) * 128 + d], ref[d], tol) << "query " << i << " head " << h;
            }
        }
    }
}

TEST_P(AttentionTest, SparseMatchesReferenceOnItsBlocks) {
    const auto c = std::get<0>(GetParam());
    Fixture f(c.H, c.Hkv, 128, c.kv_len, c.dtype, 4);
    const int q_len = 5, topk = 3;
    const auto q = test::random_floats(static_cast<std::size_t>(q_len * c.H * 128), 6, -1.5f, 1.5f);
    // A selection in arbitrary slot order with the local block last, -1 padding where fewer blocks exist.
    std::vector<std::int32_t> sel(static_cast<std::size_t>(q_len * c.Hkv * topk), -1);
    std::mt19937 rng(8);
    for (int i = 0; i < q_len; ++i)
        for (int g = 0; g < c.Hkv; ++g) {
            const int local = (c.kv_len - q_len + i) / 128;
            std::vector<int> hist(static_cast<std::size_t>(local));
            std::iota(hist.begin(), hist.end(), 0);
            std::shuffle(hist.begin(), hist.end(), rng);
            hist.resize(std::min<std::size_t>(hist.size(), topk - 1));
            std::int32_t* row = sel.data() + (i * c.Hkv + g) * topk;
            for (std::size_t s = 0; s < hist.size(); ++s) row[s] = hist[s];
            row[hist.size()] = local;
        }
    const AttentionSeq seq{0, q_len, c.kv_len, f.pages.data()};
    std::vector<float> out(q.size());
    cpu::sparse_attention(f.layer.view, {&seq, 1}, q.data(), sel.data(), topk, f.shape(), AttentionNumerics::exact,
                          out.data());
    for (int i = 0; i < q_len; ++i) {
        const int pos = c.kv_len - q_len + i;
        for (int h = 0; h < c.H; ++h) {
            const int g = h / (c.H / c.Hkv);
            std::vector<int> blocks;
            for (int s = 0; s < topk; ++s)
                if (sel[(i * c.Hkv + g) * topk + s] >= 0) blocks.push_back(sel[(i * c.Hkv + g) * topk + s]);
            const auto ref = reference_exact(f, q.data() + (i * c.H + h) * 128, h, pos, blocks);
            for (int d = 0; d < 128; ++d) ASSERT_NEAR(out[(i * c.H + h) * 128 + d], ref[d], 2e-5);
        }
    }
}

TEST_P(AttentionTest, SparseCoveringEveryBlockEqualsDenseBitForBit) {
    const auto c = std::get<0>(GetParam());
    Fixture f(c.H, c.Hkv, 128, c.kv_len, c.dtype, 5);
    const int q_len = 40;
    const int blocks = (c.kv_len + 127) / 128;
    const int topk = blocks + 2;
    const auto q = test::random_floats(static_cast<std::size_t>(q_len * c.H * 128), 7);
    std::vector<std::int32_t> sel(static_cast<std::size_t>(q_len * c.Hkv * topk));
    for (int i = 0; i < q_len; ++i)
        for (int g = 0; g < c.Hkv; ++g) {
            const int local = (c.kv_len - q_len + i) / 128;
            for (int s = 0; s < topk; ++s) sel[(i * c.Hkv + g) * topk + s] = s <= local ? s : -1;
        }
    const AttentionSeq seq{0, q_len, c.kv_len, f.pages.data()};
    for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
        std::vector<float> dense(q.size()), sparse(q.size());
        cpu::dense_attention(f.layer.view, {&seq, 1}, q.data(), f.shape(), numerics, dense.data());
        cpu::sparse_attention(f.layer.view, {&seq, 1}, q.data(), sel.data(), topk, f.shape(), numerics,
                              sparse.data());
        EXPECT_EQ(0, std::memcmp(dense.data(), sparse.data(), dense.size() * 4));
    }
}

TEST_P(AttentionTest, QueriesAreIndependentOfBatching) {
    const auto c = std::get<0>(GetParam());
    Fixture f(c.H, c.Hkv, 128, c.kv_len, c.dtype, 6);
    const int q_len = 37;
    const auto q = test::random_floats(static_cast<std::size_t>(q_len * c.H * 128), 9);
    const AttentionSeq whole{0, q_len, c.kv_len, f.pages.data()};
    const std::size_t row = static_cast<std::size_t>(c.H * 128);
    for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
        std::vector<float> all(q.size());
        cpu::dense_attention(f.layer.view, {&whole, 1}, q.data(), f.shape(), numerics, all.data());
        // Decode-style: each query alone with the cache length it would have had then.
        for (int i = 0; i < q_len; i += 6) {
            const AttentionSeq one{0, 1, c.kv_len - q_len + i + 1, f.pages.data()};
            std::vector<float> out(row);
            cpu::dense_attention(f.layer.view, {&one, 1}, q.data() + i * row, f.shape(), numerics, out.data());
            ASSERT_EQ(0, std::memcmp(out.data(), all.data() + i * row, row * 4)) << "query " << i;
        }
        // The same queries split into two sequences of one batch (sharing pages), verify-style chunks of 8.
        const AttentionSeq two[2] = {{0, 8, c.kv_len - q_len + 8, f.pages.data()},
                                     {8, 8, c.kv_len - q_len + 16, f.pages.data()}};
        std::vector<float> out(16 * row);
        cpu::dense_attention(f.layer.view, two, q.data(), f.shape(), numerics, out.data());
        ASSERT_EQ(0, std::memcmp(out.data(), all.data(), out.size() * 4));
    }
}

TEST_P(AttentionTest, ResultsDoNotDependOnTheThreadCount) {
    // Few tasks (decode, verify) cut each task's blocks into parts that different threads compute; many tasks
    // (prefill) run whole. Every row's result must be the same bits whatever the split.
    const auto c = std::get<0>(GetParam());
    Fixture f(c.H, c.Hkv, 128, c.kv_len, c.dtype, 11);
    const int blocks = (c.kv_len + 127) / 128;
    const int topk = std::max(2, blocks / 2 + 1);
    const int saved = num_threads();
    for (const int q_len : {1, 8, 40}) {
        const auto q = test::random_floats(static_cast<std::size_t>(q_len * c.H * 128), 12 + q_len);
        std::vector<std::int32_t> sel(static_cast<std::size_t>(q_len * c.Hkv * topk), -1);
        std::mt19937 rng(static_cast<std::uint32_t>(q_len));
        for (int i = 0; i < q_len; ++i)
            for (int g = 0; g < c.Hkv; ++g) {
                const int local = (c.kv_len - q_len + i) / 128;
                std::int32_t* row = sel.data() + (i * c.Hkv + g) * topk;
                for (int s = 0; s + 1 < topk; ++s) row[s] = local > 0 ? static_cast<std::int32_t>(rng() % local) : -1;
                row[topk - 1] = local;  // duplicates and -1 are allowed: the attention takes the distinct valid ones
            }
        const AttentionSeq seq{0, q_len, c.kv_len, f.pages.data()};
        for (auto numerics : {AttentionNumerics::exact, AttentionNumerics::q8kv4}) {
            std::vector<float> dense1(q.size()), sparse1(q.size());
            set_num_threads(1);
            cpu::dense_attention(f.layer.view, {&seq, 1}, q.data(), f.shape(), numerics, dense1.data());
            cpu::sparse_attention(f.layer.view, {&seq, 1}, q.data(), sel.data(), topk, f.shape(), numerics,
                                  sparse1.data());
            for (const int threads : {2, 5, 16}) {
                set_num_threads(threads);
                std::vector<float> dense(q.size(), NAN), sparse(q.size(), NAN);
                cpu::dense_attention(f.layer.view, {&seq, 1}, q.data(), f.shape(), numerics, dense.data());
                cpu::sparse_attention(f.layer.view, {&seq, 1}, q.data(), sel.data(), topk, f.shape(), numerics,
                                      sparse.data());
                EXPECT_EQ(0, std::memcmp(dense.data(), dense1.data(), dense.size() * 4))
                    << "dense, q_len " << q_len << ", " << threads << " threads";
                EXPECT_EQ(0, std::memcmp(sparse.data(), sparse1.data(), sparse.size() * 4))
                    << "sparse, q_len " << q_len << ", " << threads << " threads";
            }
        }
    }
    set_num_threads(saved);
}

const AttentionCase kAttentionCases[] = {
    {4, 2, 300, KvCacheDtype::NVFP4},
    {8, 1, 129, KvCacheDtype::NVFP4},
    {16, 1, 700, KvCacheDtype::NVFP4},
    {4, 4, 256, KvCacheDtype::FP8},
    {6, 2, 200, KvCacheDtype::BF16},
};

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Combine(::testing::ValuesIn(kAttentionCases), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<AttentionCase, bool>>& param_info) {
                             const auto c = std::get<0>(param_info.param);
                             return fmt::format("H{}_kv{}_len{}_{}_{}", c.H, c.Hkv, c.kv_len, kv_cache_dtype_name(c.dtype),
                                                std::get<1>(param_info.param) ? "simd" : "scalar");
                         });

TEST(Attention, NegativePositionGivesZeroOutput) {
    Fixture f(2, 1, 128, 3, KvCacheDtype::NVFP4, 1);
    const auto q = test::random_floats(5 * 2 * 128, 2);
    const AttentionSeq seq{0, 5, 3, f.pages.data()};  // 5 queries, 3 tokens: queries 0 and 1 are at -2 and -1
    std::vector<float> out(q.size(), 7.0f);
    cpu::dense_attention(f.layer.view, {&seq, 1}, q.data(), f.shape(), AttentionNumerics::exact, out.data());
    for (int i = 0; i < 2 * 2 * 128; ++i) EXPECT_EQ(out[i], 0.0f);
    EXPECT_NE(out[2 * 2 * 128], 0.0f);
}

}  // namespace
}  // namespace msa
