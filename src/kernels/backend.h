// The compute backend the model runs on. The model's forward pass (src/model) is written once against this
// interface; the CPU backend (cpu/cpu_backend.h) implements it with the kernels in cpu/, a CUDA backend implements
// the same operations on the GPU.
//
// Memory: float tensors passed to the operations live in the backend's memory (host memory for the CPU backend,
// device memory for CUDA) and are obtained from allocate(); weights are handed to the backend once at load time
// (adopt_weight / adopt_floats) and the returned views are what the operations take. Small integer metadata (token
// ids, sequence descriptors, page tables, row lists) is always passed in host memory; a device backend copies what
// it needs. Every row of every operation is computed independently of the other rows of the call (results never
// depend on batch composition), which the engine relies on for decode-after-prefill and batching invariance.
#pragma once

#include "kernels/kernel_types.h"
#include "kernels/kv_layout.h"
#include "kernels/weight_view.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace msa {

// A block of backend memory, freed when the handle goes away.
class BackendBuffer {
public:
    virtual ~BackendBuffer() = default;
    virtual void* data() = 0;
    virtual std::size_t size() const = 0;
    float* floats() { return static_cast<float*>(data()); }
};

// Everything the attention operation needs to know about one layer.
struct AttentionLayer {
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    int rotary_dim = 0;
    double rope_theta = 0.0;
    float norm_eps = 1e-6f;
    const float* q_norm = nullptr;  // [head_dim] Gemma weights; null: no q/k norm
    const float* k_norm = nullptr;
    // MSA (sparse) layers: index heads = num_kv_heads, one shared index-key head.
    bool msa = false;
    int index_dim = 0;
    int topk_blocks = 0;
    const float* index_q_norm = nullptr;  // [index_dim]
    const float* index_k_norm = nullptr;
    KvLayerView kv;  // this layer's part of the KV pages
};

struct AttentionOptions {
    AttentionNumerics numerics = AttentionNumerics::exact;
    TopkMode topk_mode = TopkMode::keyed;
    // MSA layers: when not null, receives the selected blocks [tokens][num_kv_heads][topk_blocks] (host memory).
    std::int32_t* selected_blocks = nullptr;
};

// One routed expert (or the shared expert): out = w2(swigluoai(w1 x, w3 x)).
struct ExpertWeightsView {
    WeightView w1;  // gate [I][H]
    WeightView w3;  // up   [I][H]
    WeightView w2;  // down [H][I]
};

struct MoeLayer {
    WeightView router;               // [E][H], FP32 in M3 (any format works: logits are computed exactly)
    const float* router_bias = nullptr;  // [E] e_score_correction_bias, or null
    int top_k = 0;
    float routed_scaling_factor = 1.0f;
    std::span<const ExpertWeightsView> experts;
    const ExpertWeightsView* shared = nullptr;  // weight 1, never W4A4
    bool w4a4 = false;                         // M3.1: routed experts quantise their activations to NVFP4
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;

    // ---- memory ----
    virtual std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) = 0;
    virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
    // A weight described in host memory (usually a memory-mapped checkpoint) -> the view the operations take.
    // The backend keeps whatever it needs alive for its own lifetime.
    virtual WeightView adopt_weight(const WeightView& host) = 0;
    virtual const float* adopt_floats(std::span<const float> host) = 0;

    // ---- operations ----
    // out[i] = row tokens[i] of the embedding table [vocab][hidden] (any unquantised format), as floats.
    virtual void embed(const WeightView& table, std::span<const std::int32_t> tokens, float* out) = 0;
    // Gemma RMSNorm of [rows][dim] (out may alias x).
    virtual void rms_norm(const float* x, const float* weight, std::int64_t rows, std::int64_t dim, float eps,
                          float* out) = 0;
    // y[m][N] = x[m][K] W^T.
    virtual void linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode) = 0;
    // ys[i][m][N_i] = x[m][K] W_i^T for several weights on the same input (a layer's q/k/v/index projections):
    // the results of linear() on each, bit for bit; a backend may run them together (the CPU one in one parallel
    // region). ws and ys have the same length.
    virtual void linear_group(std::span<const WeightView* const> ws, const float* x, std::int64_t m,
                              std::span<float* const> ys, ActivationMode mode) {
        for (std::size_t i = 0; i < ws.size(); ++i) linear(*ws[i], x, m, ys[i], mode);
    }
    // a += b over n floats.
    virtual void add(float* a, const float* b, std::int64_t n) = 0;
    // dst[i] = src[rows[i]] for rows of `dim` floats.
    virtual void gather_rows(const float* src, std::span<const std::int64_t> rows, std::int64_t dim, float* dst) = 0;

    // The attention core of one layer for a batch of sequences: from the raw projections q [T][H][D],
    // k and v [T][Hkv][D] (and for MSA layers index_q [T][Hkv][Di], index_k [T][Di]) to the attention output
    // [T][H][D]. Applies the per-head norms and partial RoPE at each token's position, writes K, V and index-K into
    // the pages (quantising on insert), then attends: densely, or through the MSA indexer, top-k and sparse
    // attention. q, k, index_q and index_k are modified in place (normed and rotated).
    virtual void attention(const AttentionLayer& layer, std::span<const AttentionSeq> seqs, float* q, float* k,
                           const float* v, float* index_q, float* index_k, float* out,
                           const AttentionOptions& options) = 0;

    // Dense swigluoai MLP: out = down(swigluoai(gate x, up x)).
    virtual void mlp(const ExpertWeightsView& weights, const float* x, std::int64_t m, float* out,
                     ActivationMode mode) = 0;
    // MoE FFN: router, top-k, routed experts, shared expert (model.md sections 1 and 7).
    virtual void moe(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode) = 0;
};

}  // namespace msa
