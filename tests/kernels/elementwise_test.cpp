// Norms, RoPE, swigluoai, MoE routing and the E4M3 rounding helpers against plain references written here.
#include "core/cpu_features.h"
#include "core/parallel.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax_pv.h"
#include "kernels/cpu/swiglu.h"
#include "support/cpu_mode.h"
#include "support/test_data.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>

namespace msa {
namespace {

using test::random_floats;

TEST(GemmaRmsNorm, MatchesFormula) {
    const int rows = 5, dim = 96;
    const auto x = random_floats(rows * dim, 1, -3, 3);
    const auto w = random_floats(dim, 2, -0.5, 0.5);
    std::vector<float> y(rows * dim);
    cpu::gemma_rms_norm(x.data(), w.data(), rows, dim, 1e-6f, y.data());
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
        for (int i = 0; i < dim; ++i) {
            const double expect = x[r * dim + i] * inv * (1.0 + w[i]);
            EXPECT_NEAR(y[r * dim + i], expect, 1e-6 * std::fabs(expect) + 1e-7);
        }
    }
    // In place, and an all-zero row stays zero (eps keeps it finite).
    std::vector<float> z(dim, 0.0f);
    cpu::gemma_rms_norm(z.data(), w.data(), 1, dim, 1e-6f, z.data());
    for (float v : z) EXPECT_EQ(v, 0.0f);
}

// The rows' sums of squares advance four at a time; each row must still give the one-row-at-a-time loop's bits (the
// code before session 20, written out here), for every count of rows around the groups of four, in place too.
TEST(GemmaRmsNorm, RowsInGroupsOfFourEqualOneRowAtATimeBitForBit) {
    const int saved = num_threads();
    for (const int dim : {16, 96, 128, 1024}) {
        for (int rows = 1; rows <= 11; ++rows) {
            const auto x = random_floats(static_cast<std::size_t>(rows * dim), 40 + rows, -3, 3);
            const auto w = random_floats(static_cast<std::size_t>(dim), 41, -0.5, 0.5);
            std::vector<float> expect(x.size());
            for (int r = 0; r < rows; ++r) {
                const float* xr = x.data() + r * dim;
                double ss = 0.0;
                for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
                const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-6f));
                for (int i = 0; i < dim; ++i) expect[r * dim + i] = (xr[i] * inv) * (1.0f + w[i]);
            }
            for (const int threads : {1, 2, 3}) {
                set_num_threads(threads);
                std::vector<float> y(x.size(), NAN);
                cpu::gemma_rms_norm(x.data(), w.data(), rows, dim, 1e-6f, y.data());
                EXPECT_EQ(0, std::memcmp(y.data(), expect.data(), y.size() * 4))
                    << "dim " << dim << ", rows " << rows << ", " << threads << " threads";
                auto z = x;
                cpu::gemma_rms_norm(z.data(), w.data(), rows, dim, 1e-6f, z.data());
                EXPECT_EQ(0, std::memcmp(z.data(), expect.data(), z.size() * 4)) << "in place, dim " << dim;
            }
        }
    }
    set_num_threads(saved);
}

// rope_tables_reused() gives rope_tables()'s values for whatever it is asked, whether the arguments repeat or change.
TEST(Rope, ReusedTablesEqualFreshTables) {
    const std::vector<std::int32_t> a = {4096, 4097}, b = {4096, 4098}, c = {4096};
    struct Call {
        const std::vector<std::int32_t>* pos;
        int rotary;
        double theta;
    };
    const Call calls[] = {{&a, 64, 5e6}, {&a, 64, 5e6}, {&b, 64, 5e6}, {&b, 64, 5e6}, {&c, 64, 5e6},
                          {&a, 32, 5e6}, {&a, 64, 1e4}, {&a, 64, 5e6}, {&c, 64, 5e6}};
    for (std::size_t i = 0; i < std::size(calls); ++i) {
        const Call& k = calls[i];
        const auto count = static_cast<std::int64_t>(k.pos->size());
        const cpu::RopeTables fresh = cpu::rope_tables(k.pos->data(), count, k.rotary, k.theta);
        const cpu::RopeTables& reused = cpu::rope_tables_reused(k.pos->data(), count, k.rotary, k.theta);
        EXPECT_EQ(reused.half, fresh.half) << "call " << i;
        ASSERT_EQ(reused.cos.size(), fresh.cos.size()) << "call " << i;
        ASSERT_EQ(reused.sin.size(), fresh.sin.size()) << "call " << i;
        EXPECT_EQ(0, std::memcmp(reused.cos.data(), fresh.cos.data(), fresh.cos.size() * 4)) << "call " << i;
        EXPECT_EQ(0, std::memcmp(reused.sin.data(), fresh.sin.data(), fresh.sin.size() * 4)) << "call " << i;
    }
}

TEST(Rope, PartialNeoxRotationInFloat64) {
    const int heads = 3, head_dim = 128, rotary = 64;
    const double theta = 5e6;
    const std::vector<std::int32_t> pos = {0, 1, 77, 131071, 1048575};
    auto x = random_floats(pos.size() * heads * head_dim, 3);
    const auto orig = x;
    const auto tables = cpu::rope_tables(pos.data(), static_cast<std::int64_t>(pos.size()), rotary, theta);
    cpu::apply_rope(x.data(), static_cast<std::int64_t>(pos.size()), heads, head_dim, tables);
    for (std::size_t p = 0; p < pos.size(); ++p)
        for (int h = 0; h < heads; ++h) {
            const float* o = orig.data() + (p * heads + h) * head_dim;
            const float* v = x.data() + (p * heads + h) * head_dim;
            for (int i = 0; i < rotary / 2; ++i) {
                const double ang = pos[p] * std::pow(theta, -2.0 * i / rotary);
                const float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
                EXPECT_FLOAT_EQ(v[i], o[i] * c - o[i + 32] * s);
                EXPECT_FLOAT_EQ(v[i + 32], o[i + 32] * c + o[i] * s);
            }
            for (int i = rotary; i < head_dim; ++i) EXPECT_EQ(v[i], o[i]);
        }
    // Position 0 is the identity.
    EXPECT_EQ(tables.cos[0], 1.0f);
    EXPECT_EQ(tables.sin[5], 0.0f);
}

TEST(Swigluoai, ClampsAndFormula) {
    const std::vector<float> gate = {-10, -1, 0, 0.5f, 6.9f, 7, 20};
    const std::vector<float> up = {-20, -7.5f, 0, 1, 6.5f, 8, -3};
    std::vector<float> out(gate.size());
    cpu::swigluoai(gate.data(), up.data(), static_cast<std::int64_t>(gate.size()), out.data());
    for (std::size_t i = 0; i < gate.size(); ++i) {
        const double g = std::min<double>(gate[i], 7.0);
        const double u = std::clamp<double>(up[i], -7.0, 7.0);
        const double expect = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
        EXPECT_NEAR(out[i], expect, 1e-6 * std::fabs(expect) + 1e-7) << i;
    }
}

TEST(Swigluoai, SimdAndScalarMatchTheFormulaOnLongRows) {
    // 1003 values: whole 8-wide steps and a tail; gates and ups across and beyond both clamps.
    const auto gate = test::random_floats(1003, 41, -12.0f, 12.0f);
    const auto up = test::random_floats(1003, 42, -12.0f, 12.0f);
    for (const bool simd : {false, true}) {
        test::ScopedCpuFeatures mode(simd);
        std::vector<float> out(gate.size()), in_place = gate;
        cpu::swigluoai(gate.data(), up.data(), static_cast<std::int64_t>(gate.size()), out.data());
        cpu::swigluoai(in_place.data(), up.data(), static_cast<std::int64_t>(gate.size()), in_place.data());
        for (std::size_t i = 0; i < gate.size(); ++i) {
            const double g = std::min<double>(gate[i], 7.0);
            const double u = std::clamp<double>(up[i], -7.0, 7.0);
            const double expect = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
            ASSERT_NEAR(out[i], expect, 2e-6 * std::fabs(expect) + 1e-7) << i << (simd ? " simd" : " scalar");
            ASSERT_EQ(out[i], in_place[i]) << i;
        }
    }
}

TEST(MoeRouting, BiasedTopkTiesRenormalisation) {
    // 6 experts; experts 1 and 3 tie on the biased score, so the lower id (1) must win the last slot.
    const std::vector<float> logits = {0.0f, 1.0f, -2.0f, 1.0f, 3.0f, -1.0f};
    const std::vector<float> bias = {0.0f, 0.5f, 0.0f, 0.5f, 0.0f, 2.0f};
    std::int32_t ids[3];
    float w[3];
    cpu::route_experts(logits.data(), bias.data(), 1, 6, 3, 2.0f, ids, w);
    // biased: e0 .5, e1 1.231, e2 .119, e3 1.231, e4 .953, e5 2.269 -> top3 = 5, 1, 3
    EXPECT_EQ(ids[0], 5);
    EXPECT_EQ(ids[1], 1);
    EXPECT_EQ(ids[2], 3);
    auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    const double sum = sig(-1) + sig(1) + sig(1);
    EXPECT_NEAR(w[0], sig(-1) / sum * 2, 1e-6);
    EXPECT_NEAR(w[1], sig(1) / sum * 2, 1e-6);
    EXPECT_NEAR(w[0] + w[1] + w[2], 2.0, 1e-6);
    // Without bias the plain sigmoid order applies.
    cpu::route_experts(logits.data(), nullptr, 1, 6, 2, 1.0f, ids, w);
    EXPECT_EQ(ids[0], 4);
    EXPECT_EQ(ids[1], 1);
}

TEST(RoundToE4m3, EqualsFormatsCastOverManyFloats) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<std::uint32_t> bits;
    std::vector<float> xs;
    for (int i = 0; i < 200000; ++i) {
        const float f = std::bit_cast<float>(bits(rng));
        if (!std::isnan(f)) xs.push_back(f);
    }
    // Every E4M3 value, the midpoints between neighbours and their float neighbours (the rounding ties).
    for (int c = 0; c < 126; ++c) {
        const float v = e4m3_to_float(static_cast<std::uint8_t>(c));
        const float n = e4m3_to_float(static_cast<std::uint8_t>(c + 1));
        for (float f : {v, (v + n) / 2, std::nextafter((v + n) / 2, 0.0f), std::nextafter((v + n) / 2, 1e9f)}) {
            xs.push_back(f);
            xs.push_back(-f);
        }
    }
    for (float f : {448.0f, 464.0f, 465.0f, 1e30f, INFINITY, -INFINITY, 0.0009765625f, 0.0009765626f}) xs.push_back(f);
    auto simd = xs;
    const CpuFeatures saved = cpu_features();
    cpu::round_rows_to_e4m3(simd.data(), static_cast<long>(simd.size()));
    set_cpu_features_for_testing(CpuFeatures{});
    auto scalar = xs;
    cpu::round_rows_to_e4m3(scalar.data(), static_cast<long>(scalar.size()));
    set_cpu_features_for_testing(saved);
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const float expect = e4m3_to_float(float_to_e4m3(xs[i], Overflow::saturate));
        ASSERT_EQ(scalar[i], expect) << "x=" << xs[i];
        ASSERT_EQ(simd[i], expect) << "x=" << xs[i];
    }
}

TEST(OnlineSoftmax, SimdMatchesScalarAndExactSoftmax) {
    const CpuFeatures saved = cpu_features();
    for (int n : {1, 7, 8, 100, 128}) {
        const auto raw = random_floats(static_cast<std::size_t>(2 * n), 9 + n, -30, 30);
        float results[2][2];
        std::vector<float> ps[2];
        for (int path = 0; path < 2; ++path) {
            set_cpu_features_for_testing(path == 0 ? saved : CpuFeatures{});
            float m = -std::numeric_limits<float>::infinity(), l = 0;
            ps[path].resize(static_cast<std::size_t>(n));
            const float a0 = cpu::online_softmax_block(raw.data(), n, 0.25f, m, l, ps[path].data());
            EXPECT_EQ(a0, 0.0f);
            const float a1 = cpu::online_softmax_block(raw.data() + n, n, 0.25f, m, l, ps[path].data());
            results[path][0] = m;
            results[path][1] = l;
            // Reference: the denominator of the full softmax over both blocks, relative to the final max.
            double mx = -1e30, sum = 0;
            for (int j = 0; j < 2 * n; ++j) mx = std::max(mx, 0.25 * raw[j]);
            for (int j = 0; j < 2 * n; ++j) sum += std::exp(0.25 * raw[j] - mx);
            EXPECT_NEAR(m, mx, 1e-5);
            EXPECT_NEAR(l, sum, 3e-6 * sum);
            EXPECT_GE(a1, 0.0f);
            EXPECT_LE(a1, 1.0f);
        }
        set_cpu_features_for_testing(saved);
        EXPECT_EQ(results[0][0], results[1][0]);
        EXPECT_NEAR(results[0][1], results[1][1], 1e-6 * results[1][1]);
        for (int j = 0; j < n; ++j) EXPECT_NEAR(ps[0][j], ps[1][j], 3e-7 * ps[1][j] + 1e-38);
    }
}

}  // namespace
}  // namespace msa
