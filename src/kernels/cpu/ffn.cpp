#include "kernels/cpu/ffn.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/swiglu.h"

#include <atomic>
#include <cstring>
#include <span>
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

namespace {

// One expert's run over its tokens in a MoE layer.
struct ExpertRun {
    const ExpertWeightsView* w = nullptr;
    std::int64_t n = 0;
    bool w4a4 = false;
    const float* in = nullptr;  // float input rows (xin, or the layer's x for the shared expert); unused with w4a4
    std::vector<float> xin, gate, up, yout;
    Q8Rows xq;
};

// A MoE layer's buffers, kept between decode-sized calls (decode runs one layer per call, dozens per token): their
// allocation and first touch were most of the serial work between the layer's parallel regions. Per thread, so that
// calls from two threads never share them; larger calls (prefill) allocate their own, so that a prefill chunk's
// buffers are not held afterwards.
constexpr std::int64_t kKeptScratchMaxTokens = 64;
struct MoeScratch {
    std::vector<float> logits, weights, expert_out;
    std::vector<std::int32_t> ids;
    std::vector<std::vector<std::int64_t>> slots_of;
    std::vector<ExpertRun> runs;  // the first `used` are this call's
    Q8Rows x_w4a4;
    std::vector<LinearTask> tasks;
};

}  // namespace

void moe_forward(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode) {
    if (m <= 0) return;
    const std::int64_t hidden = layer.router.cols;
    const int num_experts = static_cast<int>(layer.experts.size());
    const int k = layer.top_k;
    MSA_CHECK(num_experts == layer.router.rows && k >= 1 && k <= num_experts,
              "MoE layer has {} experts, a router of {} rows and top_k {}", num_experts, layer.router.rows, k);
    thread_local MoeScratch kept;
    MoeScratch own;
    MoeScratch& s = m <= kKeptScratchMaxTokens ? kept : own;

    // The router's logits and M3.1's W4A4 quantisation of each token's row (the quantiser is per row, so gathering
    // quantised rows equals quantising gathered ones) side by side, one piece each of a parallel region.
    s.logits.resize(static_cast<std::size_t>(m * num_experts));
    if (layer.w4a4) {
        parallel_for(2, 1, [&](std::size_t b, std::size_t e) {
            for (std::size_t piece = b; piece < e; ++piece) {
                if (piece == 0) {
                    linear_rows(layer.router, x, m, s.logits.data(), 0, num_experts);
                } else {
                    quantize_rows_w4a4(x, m, hidden, W4a4Input::fc1, s.x_w4a4);
                }
            }
        });
    } else {
        linear(layer.router, x, m, s.logits.data(), ActivationMode::exact);
    }
    s.ids.resize(static_cast<std::size_t>(m * k));
    s.weights.resize(s.ids.size());
    route_experts(s.logits.data(), layer.router_bias, m, num_experts, k, layer.routed_scaling_factor, s.ids.data(),
                  s.weights.data());

    // Group (token, slot) pairs by expert; every active expert (and the shared one) runs over its tokens, with the
    // gate/up products of all of them in one linear_many() and the down products in another: decode does a handful
    // of small GEMVs per layer, and one fork/join per phase instead of one per matrix keeps the threads busy.
    s.slots_of.resize(static_cast<std::size_t>(num_experts));
    for (auto& slots : s.slots_of) slots.clear();
    for (std::int64_t i = 0; i < m * k; ++i) s.slots_of[static_cast<std::size_t>(s.ids[i])].push_back(i);
    std::size_t used = 0;
    auto next_run = [&]() -> ExpertRun& {
        if (s.runs.size() == used) s.runs.emplace_back();
        return s.runs[used++];
    };
    for (int e = 0; e < num_experts; ++e) {
        const auto& slots = s.slots_of[static_cast<std::size_t>(e)];
        if (slots.empty()) continue;
        const ExpertWeightsView& w = layer.experts[static_cast<std::size_t>(e)];
        if (layer.w4a4) {
            MSA_CHECK(w.w1.format == LinearFormat::nvfp4 && w.w3.format == LinearFormat::nvfp4 &&
                          w.w2.format == LinearFormat::nvfp4,
                      "W4A4 experts need NVFP4 weights");
        }
        ExpertRun& r = next_run();
        r.w = &w;
        r.n = static_cast<std::int64_t>(slots.size());
        r.w4a4 = layer.w4a4;
        if (layer.w4a4) {
            gather_q8_rows(s.x_w4a4, slots, k, r.xq);
        } else {
            r.xin.resize(static_cast<std::size_t>(r.n * hidden));
            for (std::int64_t i = 0; i < r.n; ++i)
                std::memcpy(r.xin.data() + i * hidden, x + (slots[i] / k) * hidden, sizeof(float) * hidden);
            r.in = r.xin.data();
        }
    }
    const std::size_t routed = used;
    if (layer.shared != nullptr) {
        ExpertRun& r = next_run();
        r.w = layer.shared;
        r.n = m;
        r.w4a4 = false;
        r.in = x;
    }
    const std::span<ExpertRun> runs(s.runs.data(), used);
    s.tasks.clear();
    for (ExpertRun& r : runs) {
        const std::int64_t inter = r.w->w1.rows;
        r.gate.resize(static_cast<std::size_t>(r.n * inter));
        r.up.resize(r.gate.size());
        r.yout.resize(static_cast<std::size_t>(r.n * hidden));
        s.tasks.push_back({&r.w->w1, r.w4a4 ? nullptr : r.in, r.w4a4 ? &r.xq : nullptr, r.n, r.gate.data(), mode});
        s.tasks.push_back({&r.w->w3, r.w4a4 ? nullptr : r.in, r.w4a4 ? &r.xq : nullptr, r.n, r.up.data(), mode});
    }
    // A run's swigluoai (and its W4A4 quantisation for w2) as soon as both its gate and up are done, by the thread
    // that finished the second, while the other threads go on with the other experts' products.
    std::vector<std::atomic<int>> halves_left(runs.size());
    for (auto& h : halves_left) h.store(2, std::memory_order_relaxed);
    linear_many(s.tasks, [&](std::size_t task) {
        const std::size_t ri = task / 2;
        if (halves_left[ri].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        ExpertRun& r = runs[ri];
        const std::int64_t inter = r.w->w1.rows;
        swigluoai(r.gate.data(), r.up.data(), r.n * inter, r.gate.data());
        if (r.w4a4) quantize_rows_w4a4(r.gate.data(), r.n, inter, W4a4Input::fc2, r.xq);
    });
    s.tasks.clear();
    for (ExpertRun& r : runs)
        s.tasks.push_back(
            {&r.w->w2, r.w4a4 ? nullptr : r.gate.data(), r.w4a4 ? &r.xq : nullptr, r.n, r.yout.data(), mode});
    linear_many(s.tasks);

    s.expert_out.resize(static_cast<std::size_t>(m * k * hidden));  // [token][slot][hidden]
    for (std::size_t ri = 0, e = 0; ri < routed; ++e) {
        const auto& slots = s.slots_of[e];
        if (slots.empty()) continue;
        const ExpertRun& r = runs[ri++];
        for (std::int64_t i = 0; i < r.n; ++i)
            std::memcpy(s.expert_out.data() + slots[i] * hidden, r.yout.data() + i * hidden, sizeof(float) * hidden);
    }
    for (std::int64_t t = 0; t < m; ++t) {
        float* o = out + t * hidden;
        std::fill_n(o, hidden, 0.0f);
        for (int slot = 0; slot < k; ++slot) {
            const float w = s.weights[static_cast<std::size_t>(t * k + slot)];
            const float* y = s.expert_out.data() + (t * k + slot) * hidden;
            for (std::int64_t i = 0; i < hidden; ++i) o[i] += w * y[i];
        }
    }
    if (layer.shared != nullptr) {
        const std::vector<float>& shared = runs.back().yout;
        for (std::int64_t i = 0; i < m * hidden; ++i) out[i] += shared[static_cast<std::size_t>(i)];
    }
}

}  // namespace msa::cpu
