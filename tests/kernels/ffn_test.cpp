// MoE and MLP blocks against a reference written here in double precision from model.md: sigmoid router with
// correction bias, top-k, renormalisation and scaling, swigluoai experts, shared expert; and the W4A4 variant
// with activations quantised by the formats library.
#include "formats/nvfp4.h"
#include "kernels/cpu/ffn.h"
#include "support/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace msa {
namespace {

using test::make_weight;
using test::OwnedWeight;
using test::random_floats;

struct Expert {
    OwnedWeight w1, w3, w2;
    ExpertWeightsView view() const { return {w1.view(), w3.view(), w2.view()}; }
};

Expert make_expert(LinearFormat f, int hidden, int inter, std::uint32_t seed) {
    return {make_weight(f, inter, hidden, seed, 0.2f), make_weight(f, inter, hidden, seed + 1, 0.2f),
            make_weight(f, hidden, inter, seed + 2, 0.2f)};
}

std::vector<double> dense_matvec(const OwnedWeight& w, const std::vector<double>& x) {
    std::vector<double> y(static_cast<std::size_t>(w.rows), 0.0);
    for (std::int64_t n = 0; n < w.rows; ++n)
        for (std::int64_t k = 0; k < w.cols; ++k) y[n] += w.dense[n * w.cols + k] * x[k];
    return y;
}

// Quantise-dequantise one activation row as M3.1's W4A4 does, returning the value the GEMM sees times 1/S folded
// back (so that the product with the weights is directly the expert's pre-activation).
std::vector<double> w4a4_row(const std::vector<double>& x, bool fc1) {
    const std::size_t n = x.size();
    std::vector<float> xf(x.begin(), x.end());
    float amax = 0;
    for (float v : xf) amax = std::max(amax, std::fabs(v));
    if (fc1 && amax == 0) return std::vector<double>(n, 0.0);
    const float S = fc1 ? 2688.0f / amax : 16.0f;
    std::vector<std::uint8_t> packed(n / 2), scales(n / 16);
    nvfp4_quantize_activation_row(xf.data(), n, S, packed.data(), scales.data());
    std::vector<float> deq(n);
    nvfp4_dequantize(packed.data(), scales.data(), n, 1.0f, deq.data());
    std::vector<double> out(n);
    const double back = fc1 ? amax / 2688.0 : 1.0 / 16.0;
    for (std::size_t i = 0; i < n; ++i) out[i] = deq[i] * back;
    return out;
}

std::vector<double> expert_ref(const Expert& e, const std::vector<double>& x, bool w4a4) {
    const auto xin = w4a4 ? w4a4_row(x, true) : x;
    const auto g = dense_matvec(e.w1, xin), u = dense_matvec(e.w3, xin);
    std::vector<double> a(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
        const double gg = std::min(g[i], 7.0), uu = std::clamp(u[i], -7.0, 7.0);
        a[i] = gg / (1 + std::exp(-1.702 * gg)) * (uu + 1);
    }
    return dense_matvec(e.w2, w4a4 ? w4a4_row(a, false) : a);
}

void run_moe_case(LinearFormat f, bool w4a4, bool shared, int m) {
    const int hidden = 64, inter = 32, E = 6, top_k = 2;
    std::vector<Expert> experts;
    for (int e = 0; e < E; ++e) experts.push_back(make_expert(f, hidden, inter, 100 + 10 * e));
    const Expert shared_expert = make_expert(f, hidden, inter, 7);
    const auto router = make_weight(LinearFormat::f32, E, hidden, 3, 0.5f);
    const auto bias = random_floats(E, 4, -0.2f, 0.2f);
    std::vector<ExpertWeightsView> views;
    for (const auto& e : experts) views.push_back(e.view());
    const ExpertWeightsView shared_view = shared_expert.view();
    MoeLayer layer;
    layer.router = router.view();
    layer.router_bias = bias.data();
    layer.top_k = top_k;
    layer.routed_scaling_factor = 2.0f;
    layer.experts = views;
    layer.shared = shared ? &shared_view : nullptr;
    layer.w4a4 = w4a4;
    const auto x = random_floats(static_cast<std::size_t>(m * hidden), 5, -2, 2);
    std::vector<float> out(x.size());
    cpu::moe_forward(layer, x.data(), m, out.data(), ActivationMode::exact);

    for (int t = 0; t < m; ++t) {
        std::vector<double> xt(x.begin() + t * hidden, x.begin() + (t + 1) * hidden);
        const auto logits = dense_matvec(router, xt);
        std::vector<double> s(E), biased(E);
        for (int e = 0; e < E; ++e) {
            s[e] = 1 / (1 + std::exp(-logits[e]));
            biased[e] = s[e] + bias[e];
        }
        std::vector<int> order(E);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return biased[a] > biased[b]; });
        double sum = 0;
        for (int k = 0; k < top_k; ++k) sum += s[order[k]];
        std::vector<double> expect(hidden, 0.0);
        for (int k = 0; k < top_k; ++k) {
            const auto y = expert_ref(experts[order[k]], xt, w4a4);
            for (int i = 0; i < hidden; ++i) expect[i] += s[order[k]] / sum * 2.0 * y[i];
        }
        if (shared) {
            const auto y = expert_ref(shared_expert, xt, false);
            for (int i = 0; i < hidden; ++i) expect[i] += y[i];
        }
        double scale = 0;
        for (double v : expect) scale = std::max(scale, std::fabs(v));
        for (int i = 0; i < hidden; ++i)
            ASSERT_NEAR(out[t * hidden + i], expect[i], 2e-5 * scale + 1e-6) << "token " << t << " i " << i;
    }
}

TEST(Moe, MatchesReferenceBf16WithSharedExpert) { run_moe_case(LinearFormat::bf16, false, true, 9); }
TEST(Moe, MatchesReferenceMxfp8WithoutSharedExpert) { run_moe_case(LinearFormat::mxfp8, false, false, 4); }
TEST(Moe, MatchesReferenceNvfp4W4a4) { run_moe_case(LinearFormat::nvfp4, true, true, 7); }

TEST(Moe, TokensAreIndependentOfTheBatch) {
    const int hidden = 64, inter = 32, E = 5;
    std::vector<Expert> experts;
    for (int e = 0; e < E; ++e) experts.push_back(make_expert(LinearFormat::nvfp4, hidden, inter, 200 + 10 * e));
    std::vector<ExpertWeightsView> views;
    for (const auto& e : experts) views.push_back(e.view());
    const auto router = make_weight(LinearFormat::f32, E, hidden, 9, 0.5f);
    MoeLayer layer;
    layer.router = router.view();
    layer.top_k = 3;
    layer.routed_scaling_factor = 1.5f;
    layer.experts = views;
    const int m = 12;
    const auto x = random_floats(static_cast<std::size_t>(m * hidden), 10, -2, 2);
    for (bool w4a4 : {false, true}) {
        for (auto mode : {ActivationMode::exact, ActivationMode::int8}) {
            layer.w4a4 = w4a4;
            std::vector<float> all(x.size());
            cpu::moe_forward(layer, x.data(), m, all.data(), mode);
            for (int t = 0; t < m; ++t) {
                std::vector<float> one(hidden);
                cpu::moe_forward(layer, x.data() + t * hidden, 1, one.data(), mode);
                ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * hidden, hidden * 4)) << t;
            }
        }
    }
}

}  // namespace
}  // namespace msa
