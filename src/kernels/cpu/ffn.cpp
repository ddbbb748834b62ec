#include "kernels/cpu/ffn.h"

#include "core/error.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/swiglu.h"

#include <cstring>
#include <vector>

namespace msa::cpu {

void expert_forward(const ExpertWeightsView& w, const float* x, std::int64_t m, float* out, ActivationMode mode,
                    bool w4a4) {
    if (m <= 0) return;
    const std::int64_t inter = w.w1.rows;
    std::vector<float> gate(static_cast<std::size_t>(m * inter)), up(gate.size());
    if (w4a4) {
        MSA_CHECK(w.w1.format == LinearFormat::nvfp4 && w.w3.format == LinearFormat::nvfp4 &&
                      w.w2.format == LinearFormat::nvfp4,
                  "W4A4 experts need NVFP4 weights");
        Q8Rows xq;
        quantize_rows_w4a4(x, m, w.w1.cols, W4a4Input::fc1, xq);
        linear_q8(w.w1, xq, gate.data());
        linear_q8(w.w3, xq, up.data());
        swigluoai(gate.data(), up.data(), m * inter, gate.data());
        quantize_rows_w4a4(gate.data(), m, inter, W4a4Input::fc2, xq);
        linear_q8(w.w2, xq, out);
        return;
    }
    linear(w.w1, x, m, gate.data(), mode);
    linear(w.w3, x, m, up.data(), mode);
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

    // Group (token, slot) pairs by expert, run each expert once over its tokens.
    std::vector<std::vector<std::int64_t>> slots_of(static_cast<std::size_t>(num_experts));
    for (std::int64_t s = 0; s < m * k; ++s) slots_of[static_cast<std::size_t>(ids[s])].push_back(s);
    std::vector<float> expert_out(static_cast<std::size_t>(m * k * hidden));  // [token][slot][hidden]
    std::vector<float> xin, yout;
    for (int e = 0; e < num_experts; ++e) {
        const auto& slots = slots_of[static_cast<std::size_t>(e)];
        if (slots.empty()) continue;
        const auto n = static_cast<std::int64_t>(slots.size());
        xin.resize(static_cast<std::size_t>(n * hidden));
        yout.resize(xin.size());
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(xin.data() + i * hidden, x + (slots[i] / k) * hidden, sizeof(float) * hidden);
        expert_forward(layer.experts[static_cast<std::size_t>(e)], xin.data(), n, yout.data(), mode, layer.w4a4);
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(expert_out.data() + slots[i] * hidden, yout.data() + i * hidden, sizeof(float) * hidden);
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
        std::vector<float> shared(static_cast<std::size_t>(m * hidden));
        expert_forward(*layer.shared, x, m, shared.data(), mode, false);
        for (std::int64_t i = 0; i < m * hidden; ++i) out[i] += shared[static_cast<std::size_t>(i)];
    }
}

}  // namespace msa::cpu
