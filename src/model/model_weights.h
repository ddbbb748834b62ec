// The model's weights as the compute backend sees them: views of the memory-mapped checkpoint (no copies on the
// CPU), norm vectors as floats, and per-layer descriptions ready for Backend::attention / mlp / moe.
#pragma once

#include "kernels/backend.h"
#include "model/checkpoint_weights.h"
#include "model/model_config.h"

#include <vector>

namespace msa {

struct DecoderLayerWeights {
    const float* input_layernorm = nullptr;
    const float* post_attention_layernorm = nullptr;
    WeightView q_proj, k_proj, v_proj, o_proj;
    WeightView index_q_proj, index_k_proj;  // MSA layers
    // Norm weights and shape of the attention core; the KV view is filled in by the model.
    AttentionLayer attention;
    bool moe = false;
    ExpertWeightsView mlp;                  // dense MLP layers
    // MoE layers:
    WeightView router;
    const float* router_bias = nullptr;
    int top_k = 0;
    float routed_scaling_factor = 1.0f;
    bool w4a4 = false;
    std::vector<ExpertWeightsView> experts;
    ExpertWeightsView shared_expert;
    bool has_shared_expert = false;

    // The MoE description for Backend::moe (points into this object).
    MoeLayer moe_layer() const;
};

struct ModelWeights {
    WeightView embed_tokens;  // [vocab][hidden]
    const float* final_norm = nullptr;
    WeightView lm_head;       // [vocab][hidden]
    std::vector<DecoderLayerWeights> layers;
};

// Converts bound checkpoint tensors into backend views (adopting them into the backend). `msa_layers` says which
// layers run MSA (config.is_msa_layer, unless the user forced dense attention); `topk_blocks` is the top-k to use.
ModelWeights make_model_weights(const ModelConfig& config, const CheckpointWeights& bound, Backend& backend,
                                const std::vector<bool>& msa_layers, int topk_blocks);

// A bound linear module as a weight view in host memory (exposed for tests).
WeightView linear_weight_view(const LinearWeight& weight);

}  // namespace msa
