// MoE and MLP blocks against a reference written here in double precision from model.md: sigmoid router with
// correction bias, top-k, renormalisation and scaling, swigluoai experts, shared expert; and the W4A4 variant
// with activations quantised by the formats library.
#include "kernels/cpu/ffn.h"
#include "core/parallel.h"
#include "formats/nvfp4.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/swiglu.h"
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

// moe_forward() as it was before session 20 (its buffers allocated per call, the router alone, every swigluoai and
// fc2 quantisation serially after the gate/up region), written out here: the current one must give its bits.
void moe_forward_serial_reference(const MoeLayer& layer, const float* x, std::int64_t m, float* out,
                                  ActivationMode mode) {
    const std::int64_t hidden = layer.router.cols;
    const int num_experts = static_cast<int>(layer.experts.size());
    const int k = layer.top_k;
    std::vector<float> logits(static_cast<std::size_t>(m * num_experts));
    cpu::linear(layer.router, x, m, logits.data(), ActivationMode::exact);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(m * k));
    std::vector<float> weights(ids.size());
    cpu::route_experts(logits.data(), layer.router_bias, m, num_experts, k, layer.routed_scaling_factor, ids.data(),
                       weights.data());
    std::vector<std::vector<std::int64_t>> slots_of(static_cast<std::size_t>(num_experts));
    for (std::int64_t s = 0; s < m * k; ++s) slots_of[static_cast<std::size_t>(ids[s])].push_back(s);
    struct Run {
        const ExpertWeightsView* w;
        std::int64_t n;
        bool w4a4;
        std::vector<float> xin, gate, up, yout;
        cpu::Q8Rows xq;
    };
    std::vector<Run> runs;
    runs.reserve(static_cast<std::size_t>(num_experts) + 1);
    cpu::Q8Rows x_w4a4;
    if (layer.w4a4) cpu::quantize_rows_w4a4(x, m, hidden, cpu::W4a4Input::fc1, x_w4a4);
    for (int e = 0; e < num_experts; ++e) {
        const auto& slots = slots_of[static_cast<std::size_t>(e)];
        if (slots.empty()) continue;
        Run& r = runs.emplace_back();
        r.w = &layer.experts[static_cast<std::size_t>(e)];
        r.n = static_cast<std::int64_t>(slots.size());
        r.w4a4 = layer.w4a4;
        if (layer.w4a4) {
            const std::int64_t groups = hidden / 16;
            r.xq.m = r.n;
            r.xq.k = hidden;
            r.xq.q.resize(static_cast<std::size_t>(r.n * hidden));
            r.xq.d.resize(static_cast<std::size_t>(r.n * groups));
            r.xq.row_mul.resize(static_cast<std::size_t>(r.n));
            for (std::int64_t i = 0; i < r.n; ++i) {
                const std::int64_t row = slots[static_cast<std::size_t>(i)] / k;
                std::memcpy(r.xq.q.data() + i * hidden, x_w4a4.q.data() + row * hidden,
                            static_cast<std::size_t>(hidden));
                std::memcpy(r.xq.d.data() + i * groups, x_w4a4.d.data() + row * groups,
                            sizeof(float) * static_cast<std::size_t>(groups));
                r.xq.row_mul[static_cast<std::size_t>(i)] = x_w4a4.row_mul[static_cast<std::size_t>(row)];
            }
        } else {
            r.xin.resize(static_cast<std::size_t>(r.n * hidden));
            for (std::int64_t i = 0; i < r.n; ++i)
                std::memcpy(r.xin.data() + i * hidden, x + (slots[i] / k) * hidden, sizeof(float) * hidden);
        }
    }
    const std::size_t routed = runs.size();
    if (layer.shared != nullptr) {
        Run& r = runs.emplace_back();
        r.w = layer.shared;
        r.n = m;
        r.w4a4 = false;
    }
    std::vector<cpu::LinearTask> tasks;
    for (Run& r : runs) {
        const std::int64_t inter = r.w->w1.rows;
        r.gate.resize(static_cast<std::size_t>(r.n * inter));
        r.up.resize(r.gate.size());
        const float* in = r.xin.empty() ? x : r.xin.data();
        tasks.push_back({&r.w->w1, r.w4a4 ? nullptr : in, r.w4a4 ? &r.xq : nullptr, r.n, r.gate.data(), mode});
        tasks.push_back({&r.w->w3, r.w4a4 ? nullptr : in, r.w4a4 ? &r.xq : nullptr, r.n, r.up.data(), mode});
    }
    cpu::linear_many(tasks);
    tasks.clear();
    for (Run& r : runs) {
        const std::int64_t inter = r.w->w1.rows;
        cpu::swigluoai(r.gate.data(), r.up.data(), r.n * inter, r.gate.data());
        if (r.w4a4) cpu::quantize_rows_w4a4(r.gate.data(), r.n, inter, cpu::W4a4Input::fc2, r.xq);
        r.yout.resize(static_cast<std::size_t>(r.n * hidden));
        tasks.push_back(
            {&r.w->w2, r.w4a4 ? nullptr : r.gate.data(), r.w4a4 ? &r.xq : nullptr, r.n, r.yout.data(), mode});
    }
    cpu::linear_many(tasks);
    std::vector<float> expert_out(static_cast<std::size_t>(m * k * hidden));
    for (std::size_t ri = 0, e = 0; ri < routed; ++e) {
        const auto& slots = slots_of[e];
        if (slots.empty()) continue;
        const Run& r = runs[ri++];
        for (std::int64_t i = 0; i < r.n; ++i)
            std::memcpy(expert_out.data() + slots[i] * hidden, r.yout.data() + i * hidden, sizeof(float) * hidden);
    }
    for (std::int64_t t = 0; t < m; ++t) {
        float* o = out + t * hidden;
        std::fill_n(o, hidden, 0.0f);
        for (int s = 0; s < k; ++s) {
            const float w = weights[static_cast<std::size_t>(t * k + s)];
            const float* y = expert_out.data() + (t * k + s) * hidden;
            for (std::int64_t i = 0; i < hidden; ++i) o[i] += w * y[i];
        }
    }
    if (layer.shared != nullptr) {
        const std::vector<float>& shared = runs.back().yout;
        for (std::int64_t i = 0; i < m * hidden; ++i) out[i] += shared[static_cast<std::size_t>(i)];
    }
}

// The MoE layer with its buffers kept between calls, the router and fc1 quantisation in one region and each expert's
// swigluoai inside the gate/up region gives the serial version's bits: every format, with and without the shared
// expert and bias, decode-sized and larger batches (70 tokens: above what the kept buffers serve), 1-4 threads, and
// calls of different sizes one after another (the kept buffers shrink and grow).
TEST(Moe, EqualsTheSerialVersionBitForBit) {
    const int hidden = 128, inter = 64, E = 8;
    const int saved = num_threads();
    for (const LinearFormat f : {LinearFormat::bf16, LinearFormat::mxfp8, LinearFormat::nvfp4}) {
        std::vector<Expert> experts;
        for (int e = 0; e < E; ++e) experts.push_back(make_expert(f, hidden, inter, 300 + 10 * e));
        const Expert shared_expert = make_expert(f == LinearFormat::nvfp4 ? LinearFormat::mxfp8 : f, hidden, inter, 17);
        std::vector<ExpertWeightsView> views;
        for (const auto& e : experts) views.push_back(e.view());
        const ExpertWeightsView shared_view = shared_expert.view();
        const auto router = make_weight(LinearFormat::f32, E, hidden, 19, 0.5f);
        const auto bias = random_floats(E, 20, -0.2f, 0.2f);
        for (const bool w4a4 : {false, true}) {
            if (w4a4 && f != LinearFormat::nvfp4) continue;
            for (const bool shared : {false, true}) {
                MoeLayer layer;
                layer.router = router.view();
                layer.router_bias = shared ? bias.data() : nullptr;
                layer.top_k = shared ? 4 : 3;
                layer.routed_scaling_factor = 2.5f;
                layer.experts = views;
                layer.shared = shared ? &shared_view : nullptr;
                layer.w4a4 = w4a4;
                for (const auto mode : {ActivationMode::exact, ActivationMode::int8}) {
                    for (const int m : {1, 2, 1, 9, 33, 70, 1}) {
                        const auto x = random_floats(static_cast<std::size_t>(m * hidden), 21 + m, -2, 2);
                        set_num_threads(1);
                        std::vector<float> expect(x.size(), NAN);
                        moe_forward_serial_reference(layer, x.data(), m, expect.data(), mode);
                        for (const int threads : {1, 2, 4}) {
                            set_num_threads(threads);
                            std::vector<float> got(x.size(), NAN);
                            cpu::moe_forward(layer, x.data(), m, got.data(), mode);
                            ASSERT_EQ(0, std::memcmp(got.data(), expect.data(), got.size() * 4))
                                << linear_format_name(f) << (w4a4 ? " W4A4" : "") << (shared ? " shared" : "")
                                << (mode == ActivationMode::int8 ? " int8" : " exact") << ", m " << m << ", " << threads
                                << " threads";
                        }
                    }
                }
            }
        }
    }
    set_num_threads(saved);
}

}  // namespace
}  // namespace msa
