// Binding a checkpoint's tensors to the model: every weight the config calls for is looked up by its real name,
// its storage format detected from what is stored, and its dtype and shape checked against the config.
//
// Format detection (model.md section 7), per linear module, from the stored tensors only:
//   weight F8_E4M3 [N, K] + weight_scale_inv U8 [N, K/32]                          -> MXFP8
//   weight U8 [N, K/2] + weight_scale F8_E4M3 [N, K/16] + weight_scale_2 F32 [] or [1] -> NVFP4 (input_scale optional)
//   weight BF16 / F16 / F32 [N, K]                                                  -> as stored
// `quantization_config` plays no part. Anything else (an F8 weight without scales, a U8 weight without NVFP4
// scales, a wrong shape) is an msa::Error naming the tensor and its file.
#pragma once

#include "formats/dtype.h"
#include "formats/safetensors_reader.h"
#include "model/model_config.h"
#include "model/weight_names.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

enum class WeightFormat { BF16, F16, F32, MXFP8, NVFP4 };

std::string_view weight_format_name(WeightFormat format);

// What a weight is for (how `msa info` groups parameters).
enum class WeightGroup {
    embedding,
    lm_head,
    norm,
    attention,
    indexer,
    dense_mlp,
    router,
    routed_expert,
    shared_expert
};

std::string_view weight_group_name(WeightGroup group);

// One weight the config calls for: a plain tensor (full tensor name, its shape) or a linear module (module name,
// logical shape [out, in]).
struct WeightSpec {
    std::string name;
    bool linear = false;
    std::vector<std::int64_t> shape;
    WeightGroup group = WeightGroup::norm;
    int layer = -1;                // -1 for embedding, final norm and lm_head
    std::string alternative_name;  // another accepted spelling (the router bias), empty when none
};

// Every weight of the model in a fixed order (embedding, layers, final norm, lm_head): exactly what
// bind_checkpoint_weights looks up. `msa info` counts these when no weight files are present.
std::vector<WeightSpec> model_weight_specs(const ModelConfig& config, const WeightNames& names);

// One linear layer y = x W^T with W logically [out_features, in_features].
struct LinearWeight {
    std::string name;  // module name, e.g. "language_model.model.layers.3.self_attn.q_proj"
    WeightFormat format = WeightFormat::BF16;
    std::int64_t out_features = 0;
    std::int64_t in_features = 0;
    const TensorView* weight = nullptr;        // BF16/F16/F32 [N, K]; MXFP8 F8_E4M3 [N, K]; NVFP4 U8 [N, K/2]
    const TensorView* scale = nullptr;         // MXFP8: U8 UE8M0 [N, K/32]; NVFP4: F8_E4M3 [N, K/16]
    const TensorView* global_scale = nullptr;  // NVFP4: F32 weight_scale_2 ([] or [1])
    const TensorView* input_scale = nullptr;   // NVFP4: optional F32 input_scale

    bool bound() const { return weight != nullptr; }
    // Bytes of every tensor of the module.
    std::uint64_t stored_bytes() const;
};

// Binds the linear module `name` of logical shape [out, in]. Throws msa::Error naming the tensor when it is absent,
// of an unsupported combination, or misshapen.
LinearWeight bind_linear(const Checkpoint& checkpoint, const std::string& name, std::int64_t out_features,
                         std::int64_t in_features);

struct ExpertWeights {
    LinearWeight w1;  // gate [I, H]
    LinearWeight w3;  // up   [I, H]
    LinearWeight w2;  // down [H, I]
};

struct LayerWeights {
    const TensorView* input_layernorm = nullptr;           // [H]
    const TensorView* post_attention_layernorm = nullptr;  // [H]
    LinearWeight q_proj, k_proj, v_proj, o_proj;           // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
    const TensorView* q_norm = nullptr;                    // [D]; null when use_qk_norm is false
    const TensorView* k_norm = nullptr;

    bool msa = false;                          // config.is_msa_layer(layer)
    LinearWeight index_q_proj;                 // [index_heads*Di, H]
    LinearWeight index_k_proj;                 // [Di, H]
    const TensorView* index_q_norm = nullptr;  // [Di]
    const TensorView* index_k_norm = nullptr;  // [Di]

    bool moe = false;                                        // config.is_moe_layer(layer)
    LinearWeight mlp_gate_proj, mlp_up_proj, mlp_down_proj;  // dense MLP: [Id, H], [Id, H], [H, Id]
    const TensorView* router_gate = nullptr;                 // [E, H] (F32 in M3)
    const TensorView* router_bias = nullptr;                 // [E]; null when use_routing_bias is false
    std::vector<ExpertWeights> experts;                      // E routed experts
    bool has_shared_expert = false;
    LinearWeight shared_gate_proj, shared_up_proj, shared_down_proj;  // [Is, H], [Is, H], [H, Is]
};

struct CheckpointWeights {
    WeightNames names;
    const TensorView* embed_tokens = nullptr;  // [V, H]
    const TensorView* final_norm = nullptr;    // [H]
    LinearWeight lm_head;                      // [V, H]; the embedding itself (BF16/F16/F32) when tie_word_embeddings
    std::vector<LayerWeights> layers;
    // Vision tensors, recognised and skipped.
    std::vector<const TensorView*> vision;
    // Tensors neither bound nor vision (e.g. MTP modules): not loaded, listed by `msa info`.
    std::vector<const TensorView*> unused;
};

// Binds every weight of the model described by `config`. Throws msa::Error naming the first missing, misshapen or
// mistyped tensor (and its file).
CheckpointWeights bind_checkpoint_weights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace msa
