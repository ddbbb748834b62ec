// The real tensor names of MiniMax-M3-family checkpoints (model.md section 3).
//
// Two prefix styles exist: the VL wrapper of the public checkpoints (`language_model.model.*` and
// `language_model.lm_head.weight`) and text-only checkpoints (`model.*` and `lm_head.weight`). Vision tensors
// (`vision_tower.*`, `multi_modal_projector.*`, `patch_merge_mlp.*`) are recognised so that they can be skipped.
//
// Linear layers are named by their module ("...self_attn.q_proj"); the stored tensors are the module name plus a
// suffix: ".weight" always, and ".weight_scale_inv" (MXFP8) or ".weight_scale" + ".weight_scale_2"
// (+ optional ".input_scale") (NVFP4). Plain tensors (norms, embeddings, router) are named in full.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace msa {

enum class WeightPrefixStyle {
    vision_language,  // language_model.model.* / language_model.lm_head.weight
    text_only,        // model.* / lm_head.weight
};

// Suffixes of the tensors of one linear module.
inline constexpr std::string_view kWeightSuffix = ".weight";
inline constexpr std::string_view kWeightScaleInvSuffix = ".weight_scale_inv";  // MXFP8 UE8M0 scales
inline constexpr std::string_view kWeightScaleSuffix = ".weight_scale";         // NVFP4 E4M3 block scales
inline constexpr std::string_view kWeightScale2Suffix = ".weight_scale_2";      // NVFP4 FP32 global scale
inline constexpr std::string_view kInputScaleSuffix = ".input_scale";           // NVFP4 activation scale (optional)

// Routed-expert projections: w1 = gate, w3 = up, w2 = down (model.md section 3).
enum class ExpertProj { w1, w2, w3 };

// True for tensors of the vision tower / projector, which a text-only engine skips.
bool is_vision_tensor(std::string_view name);

class WeightNames {
public:
    explicit WeightNames(WeightPrefixStyle style = WeightPrefixStyle::vision_language);
    // The style of a checkpoint's tensor names: vision_language when any name starts with "language_model.",
    // else text_only.
    static WeightNames detect(std::span<const std::string_view> tensor_names);

    WeightPrefixStyle style() const { return style_; }
    // "language_model.model." or "model."
    const std::string& model_prefix() const { return model_prefix_; }

    // Plain tensors of the whole model.
    std::string embed_tokens() const;  // <prefix>embed_tokens.weight
    std::string final_norm() const;    // <prefix>norm.weight
    std::string lm_head() const;       // language_model.lm_head.weight or lm_head.weight

    // Plain tensors of layer `layer`.
    std::string input_layernorm(int layer) const;
    std::string post_attention_layernorm(int layer) const;
    std::string q_norm(int layer) const;
    std::string k_norm(int layer) const;
    std::string index_q_norm(int layer) const;
    std::string index_k_norm(int layer) const;
    std::string router_gate(int layer) const;          // block_sparse_moe.gate.weight
    std::string router_bias(int layer) const;          // block_sparse_moe.e_score_correction_bias
    std::string router_bias_in_gate(int layer) const;  // block_sparse_moe.gate.e_score_correction_bias (also accepted)

    // Linear modules of layer `layer` (append a suffix above for the tensor names).
    std::string q_proj(int layer) const;
    std::string k_proj(int layer) const;
    std::string v_proj(int layer) const;
    std::string o_proj(int layer) const;
    std::string index_q_proj(int layer) const;
    std::string index_k_proj(int layer) const;
    std::string mlp_gate_proj(int layer) const;
    std::string mlp_up_proj(int layer) const;
    std::string mlp_down_proj(int layer) const;
    std::string expert(int layer, int expert, ExpertProj proj) const;  // block_sparse_moe.experts.E.w1
    std::string shared_gate_proj(int layer) const;                     // block_sparse_moe.shared_experts.gate_proj
    std::string shared_up_proj(int layer) const;
    std::string shared_down_proj(int layer) const;

private:
    std::string layer_prefix(int layer) const;  // <prefix>layers.N.

    WeightPrefixStyle style_;
    std::string model_prefix_;
};

}  // namespace msa
