#include "kernels/cpu/ffn.h"

#include "core/error.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/swiglu.h"

#include <cstring>
#include <vector>

namespace msa::cpu {
namespace {

// Rows slots[i] / k of `all` (the token of each (token, slot) pair) -> out.
void gather_q8_rows(const Q8Rows& all, const std::vector<std::int64_t>& slots, int k, Q8Rows& out) {
    const std::int64_t K = all.k, groups = all.k / 16;
    const auto n = static_cast<std::int64_t>(slots.size());
    out.m = n;
    out.k = K;
    out.q.resize(static_cast<std::size_t>(n * K));
    out.d.resize(static_cast<std::size_t>(n * groups));
    out.row_mul.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = slots[static_cast<std::size_t>(i)] / k;
        std::memcpy(out.q.data() + i * K, all.q.data() + row * K, static_cast<std::size_t>(K));
        std::memcpy(out.d.data() + i * groups, all.d.data() + row * groups, sizeof(float) * static_cast<std::size_t>(groups));
        out.row_mul[static_cast<std::size_t>(i)] = all.row_mul[static_cast<std::size_t>(row)];
    }
}

}  // namespace

void expert_forward(const ExpertWeightsView& w, const float* x, std::int64_t m, float* out, ActivationMode mode) {
    if (m <= 0) return;
    const std::int64_t inter = w.w1.rows;
    std::vector<float> gate(static_cast<std::size_t>(m * inter)), up(gate.size());
    // Gate and up in one parallel region (as the experts do): one fork/join fewer per dense layer.
    const LinearTask gate_up[] = {{&w.w1, x, nullptr, m, gate.data(), mode}, {&w.w3, x, nullptr, m, up.data(), mode}};
    linear_many(gate_up);
    swigluoai(gate.data(), up.data(), m * inter, gate.data());
    linear(w.w2, gate.data(), m, out, mode);
}

void moe_forward(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode) {
    if (m <= 0) return;
    const std::int64_t hidden = layer.router.cols;
    const int num_experts = static_cast<int>(layer.experts.size());
    const int k = layer.top_k;
    MSA_CHECK(num_experts == layer.router.rows && k >= 1 && k <= num_experts,
              "MoE layer has {} experts, a router of {} rows and top_k {}", num_experts, layer.router.rows, k);

    std::vector<float> logits(static_cast<std::size_t>(m * num_experts));
    linear(layer.router, x, m, logits.data(), ActivationMode::exact);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(m * k));
    std::vector<float> weights(ids.size());
    route_experts(logits.data(), layer.router_bias, m, num_experts, k, layer.routed_scaling_factor, ids.data(),
                  weights.data());

    // Group (token, slot) pairs by expert; every active expert (and the shared one) runs over its tokens, with the
    // gate/up products of all of them in one linear_many() and the down products in another: decode does a handful
    // of small GEMVs per layer, and one fork/join per phase instead of one per matrix keeps the threads busy.
    std::vector<std::vector<std::int64_t>> slots_of(static_cast<std::size_t>(num_experts));
    for (std::int64_t s = 0; s < m * k; ++s) slots_of[static_cast<std::size_t>(ids[s])].push_back(s);
    struct Run {
        const ExpertWeightsView* w;
        std::int64_t n;
        bool w4a4;
        std::vector<float> xin, gate, up, yout;
        Q8Rows xq;
    };
    std::vector<Run> runs;
    runs.reserve(static_cast<std::size_t>(num_experts) + 1);
    // M3.1's W4A4 experts quantise each token's row once (the quantiser is per row, so gathering quantised rows
    // equals quantising gathered ones).
    Q8Rows x_w4a4;
    if (layer.w4a4) quantize_rows_w4a4(x, m, hidden, W4a4Input::fc1, x_w4a4);
    for (int e = 0; e < num_experts; ++e) {
        const auto& slots = slots_of[static_cast<std::size_t>(e)];
        if (slots.empty()) continue;
        const ExpertWeightsView& w = layer.experts[static_cast<std::size_t>(e)];
        if (layer.w4a4) {
            MSA_CHECK(w.w1.format == LinearFormat::nvfp4 && w.w3.format == LinearFormat::nvfp4 &&
                          w.w2.format == LinearFormat::nvfp4,
                      "W4A4 experts need NVFP4 weights");
        }
        Run& r = runs.emplace_back();
        r.w = &w;
        r.n = static_cast<std::int64_t>(slots.size());
        r.w4a4 = layer.w4a4;
        if (layer.w4a4) {
            gather_q8_rows(x_w4a4, slots, k, r.xq);
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
    std::vector<LinearTask> tasks;
    for (Run& r : runs) {
        const std::int64_t inter = r.w->w1.rows;
        r.gate.resize(static_cast<std::size_t>(r.n * inter));
        r.up.resize(r.gate.size());
        const float* in = r.xin.empty() ? x : r.xin.data();
        tasks.push_back({&r.w->w1, r.w4a4 ? nullptr : in, r.w4a4 ? &r.xq : nullptr, r.n, r.gate.data(), mode});
        tasks.push_back({&r.w->w3, r.w4a4 ? nullptr : in, r.w4a4 ? &r.xq : nullptr, r.n, r.up.data(), mode});
    }
    linear_many(tasks);
    tasks.clear();
    for (Run& r : runs) {
        const std::int64_t inter = r.w->w1.rows;
        swigluoai(r.gate.data(), r.up.data(), r.n * inter, r.gate.data());
        if (r.w4a4) quantize_rows_w4a4(r.gate.data(), r.n, inter, W4a4Input::fc2, r.xq);
        r.yout.resize(static_cast<std::size_t>(r.n * hidden));
        tasks.push_back({&r.w->w2, r.w4a4 ? nullptr : r.gate.data(), r.w4a4 ? &r.xq : nullptr, r.n, r.yout.data(), mode});
    }
    linear_many(tasks);

    std::vector<float> expert_out(static_cast<std::size_t>(m * k * hidden));  // [token][slot][hidden]
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

}  // namespace msa::cpu
