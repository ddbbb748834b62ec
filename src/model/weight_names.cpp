#include "model/weight_names.h"

#include <fmt/format.h>

#include <array>

namespace msa {

namespace {

constexpr std::array<std::string_view, 3> kVisionRoots = {"vision_tower.", "multi_modal_projector.",
                                                          "patch_merge_mlp."};

std::string_view expert_proj_name(ExpertProj proj) {
    switch (proj) {
        case ExpertProj::w1:
            return "w1";
        case ExpertProj::w2:
            return "w2";
        case ExpertProj::w3:
            return "w3";
    }
    return "w1";
}

}  // namespace

bool is_vision_tensor(std::string_view name) {
    // Top-level in the public checkpoints; some exports nest them under "model.".
    if (name.starts_with("model.")) {
        name.remove_prefix(6);
    }
    for (auto root : kVisionRoots) {
        if (name.starts_with(root)) {
            return true;
        }
    }
    return false;
}

WeightNames::WeightNames(WeightPrefixStyle style)
    : style_(style), model_prefix_(style == WeightPrefixStyle::vision_language ? "language_model.model." : "model.") {}

WeightNames WeightNames::detect(std::span<const std::string_view> tensor_names) {
    for (auto name : tensor_names) {
        if (name.starts_with("language_model.")) {
            return WeightNames(WeightPrefixStyle::vision_language);
        }
    }
    return WeightNames(WeightPrefixStyle::text_only);
}

std::string WeightNames::embed_tokens() const {
    return model_prefix_ + "embed_tokens.weight";
}
std::string WeightNames::final_norm() const {
    return model_prefix_ + "norm.weight";
}
std::string WeightNames::lm_head() const {
    return style_ == WeightPrefixStyle::vision_language ? "language_model.lm_head.weight" : "lm_head.weight";
}

std::string WeightNames::layer_prefix(int layer) const {
    return fmt::format("{}layers.{}.", model_prefix_, layer);
}

std::string WeightNames::input_layernorm(int layer) const {
    return layer_prefix(layer) + "input_layernorm.weight";
}
std::string WeightNames::post_attention_layernorm(int layer) const {
    return layer_prefix(layer) + "post_attention_layernorm.weight";
}
std::string WeightNames::q_norm(int layer) const {
    return layer_prefix(layer) + "self_attn.q_norm.weight";
}
std::string WeightNames::k_norm(int layer) const {
    return layer_prefix(layer) + "self_attn.k_norm.weight";
}
std::string WeightNames::index_q_norm(int layer) const {
    return layer_prefix(layer) + "self_attn.index_q_norm.weight";
}
std::string WeightNames::index_k_norm(int layer) const {
    return layer_prefix(layer) + "self_attn.index_k_norm.weight";
}
std::string WeightNames::router_gate(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.gate.weight";
}
std::string WeightNames::router_bias(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.e_score_correction_bias";
}
std::string WeightNames::router_bias_in_gate(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.gate.e_score_correction_bias";
}

std::string WeightNames::q_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.q_proj";
}
std::string WeightNames::k_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.k_proj";
}
std::string WeightNames::v_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.v_proj";
}
std::string WeightNames::o_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.o_proj";
}
std::string WeightNames::index_q_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.index_q_proj";
}
std::string WeightNames::index_k_proj(int layer) const {
    return layer_prefix(layer) + "self_attn.index_k_proj";
}
std::string WeightNames::mlp_gate_proj(int layer) const {
    return layer_prefix(layer) + "mlp.gate_proj";
}
std::string WeightNames::mlp_up_proj(int layer) const {
    return layer_prefix(layer) + "mlp.up_proj";
}
std::string WeightNames::mlp_down_proj(int layer) const {
    return layer_prefix(layer) + "mlp.down_proj";
}
std::string WeightNames::expert(int layer, int expert, ExpertProj proj) const {
    return fmt::format("{}block_sparse_moe.experts.{}.{}", layer_prefix(layer), expert, expert_proj_name(proj));
}
std::string WeightNames::shared_gate_proj(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.shared_experts.gate_proj";
}
std::string WeightNames::shared_up_proj(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.shared_experts.up_proj";
}
std::string WeightNames::shared_down_proj(int layer) const {
    return layer_prefix(layer) + "block_sparse_moe.shared_experts.down_proj";
}

}  // namespace msa
