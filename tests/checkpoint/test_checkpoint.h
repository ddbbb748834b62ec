// A generator of small checkpoints in the real MiniMax-M3 layout for the tests, written from model.md section 3 and
// 4 directly (tensor names spelled out here, shapes read from the config JSON), independently of WeightNames and
// model_weight_specs. Tests edit the tensor map before writing to produce corrupt checkpoints.
#pragma once

#include "formats/safetensors_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace msa::test {

enum class StoredFormat { bf16, f32, mxfp8, nvfp4 };

struct StoredTensor {
    DType dtype = DType::BF16;
    std::vector<std::int64_t> shape;
};

struct GeneratorOptions {
    bool vl_prefix = true;                          // language_model.model.* vs model.*
    StoredFormat projections = StoredFormat::bf16;  // attention, indexer, dense MLP, shared expert
    StoredFormat experts = StoredFormat::nvfp4;     // routed experts
    bool vision_tensors = true;                     // add a few vision_tower.* / projector tensors
    bool bias_in_gate = false;                      // block_sparse_moe.gate.e_score_correction_bias
    bool shared_scale2 = false;                     // w3 has no weight_scale_2 of its own (shares w1's)
};

using TensorMap = std::map<std::string, StoredTensor>;

inline void add_linear(TensorMap& map, const std::string& module, std::int64_t out, std::int64_t in,
                       StoredFormat format, bool with_scale2 = true) {
    switch (format) {
        case StoredFormat::bf16:
            map[module + ".weight"] = {DType::BF16, {out, in}};
            break;
        case StoredFormat::f32:
            map[module + ".weight"] = {DType::F32, {out, in}};
            break;
        case StoredFormat::mxfp8:
            map[module + ".weight"] = {DType::F8_E4M3, {out, in}};
            map[module + ".weight_scale_inv"] = {DType::U8, {out, in / 32}};
            break;
        case StoredFormat::nvfp4:
            map[module + ".weight"] = {DType::U8, {out, in / 2}};
            map[module + ".weight_scale"] = {DType::F8_E4M3, {out, in / 16}};
            if (with_scale2) {
                map[module + ".weight_scale_2"] = {DType::F32, {}};
            }
            break;
    }
}

// Every tensor of the text model described by a flat config `c` (plus vision tensors when asked).
inline TensorMap checkpoint_tensors(const nlohmann::json& c, const GeneratorOptions& o) {
    TensorMap map;
    const std::string root = o.vl_prefix ? "language_model.model." : "model.";
    const std::int64_t hidden = c["hidden_size"];
    const std::int64_t vocab = c["vocab_size"];
    const std::int64_t heads = c["num_attention_heads"];
    const std::int64_t kv_heads = c["num_key_value_heads"];
    const std::int64_t head_dim = c["head_dim"];
    const int layers = c["num_hidden_layers"];
    map[root + "embed_tokens.weight"] = {DType::BF16, {vocab, hidden}};
    map[root + "norm.weight"] = {DType::BF16, {hidden}};
    if (!c.value("tie_word_embeddings", false)) {
        map[o.vl_prefix ? "language_model.lm_head.weight" : "lm_head.weight"] = {DType::BF16, {vocab, hidden}};
    }
    const auto& sparse = c["sparse_attention_config"];
    for (int l = 0; l < layers; ++l) {
        const std::string p = fmt::format("{}layers.{}.", root, l);
        map[p + "input_layernorm.weight"] = {DType::BF16, {hidden}};
        map[p + "post_attention_layernorm.weight"] = {DType::BF16, {hidden}};
        add_linear(map, p + "self_attn.q_proj", heads * head_dim, hidden, o.projections);
        add_linear(map, p + "self_attn.k_proj", kv_heads * head_dim, hidden, o.projections);
        add_linear(map, p + "self_attn.v_proj", kv_heads * head_dim, hidden, o.projections);
        add_linear(map, p + "self_attn.o_proj", hidden, heads * head_dim, o.projections);
        map[p + "self_attn.q_norm.weight"] = {DType::BF16, {head_dim}};
        map[p + "self_attn.k_norm.weight"] = {DType::BF16, {head_dim}};
        if (sparse["use_sparse_attention"].get<bool>() && sparse["sparse_attention_freq"][l] == 1) {
            const std::int64_t index_dim = sparse["sparse_index_dim"];
            const std::int64_t index_heads = sparse["sparse_num_index_heads"];
            add_linear(map, p + "self_attn.index_q_proj", index_heads * index_dim, hidden, o.projections);
            add_linear(map, p + "self_attn.index_k_proj", index_dim, hidden, o.projections);
            map[p + "self_attn.index_q_norm.weight"] = {DType::BF16, {index_dim}};
            map[p + "self_attn.index_k_norm.weight"] = {DType::BF16, {index_dim}};
        }
        if (c["moe_layer_freq"][l] == 0) {
            const std::int64_t width = c["dense_intermediate_size"];
            add_linear(map, p + "mlp.gate_proj", width, hidden, o.projections);
            add_linear(map, p + "mlp.up_proj", width, hidden, o.projections);
            add_linear(map, p + "mlp.down_proj", hidden, width, o.projections);
            continue;
        }
        const std::int64_t experts = c["num_local_experts"];
        const std::int64_t width = c["intermediate_size"];
        map[p + "block_sparse_moe.gate.weight"] = {DType::F32, {experts, hidden}};
        map[p + (o.bias_in_gate ? "block_sparse_moe.gate.e_score_correction_bias"
                                : "block_sparse_moe.e_score_correction_bias")] = {DType::F32, {experts}};
        for (int e = 0; e < experts; ++e) {
            const std::string ep = fmt::format("{}block_sparse_moe.experts.{}.", p, e);
            add_linear(map, ep + "w1", width, hidden, o.experts);
            add_linear(map, ep + "w3", width, hidden, o.experts, !o.shared_scale2);
            add_linear(map, ep + "w2", hidden, width, o.experts);
        }
        if (c["n_shared_experts"] == 1) {
            const std::int64_t shared = c["shared_intermediate_size"];
            add_linear(map, p + "block_sparse_moe.shared_experts.gate_proj", shared, hidden, o.projections);
            add_linear(map, p + "block_sparse_moe.shared_experts.up_proj", shared, hidden, o.projections);
            add_linear(map, p + "block_sparse_moe.shared_experts.down_proj", hidden, shared, o.projections);
        }
    }
    if (o.vision_tensors) {
        map["vision_tower.blocks.0.attn.qkv.weight"] = {DType::BF16, {48, 16}};
        map["multi_modal_projector.linear_1.weight"] = {DType::BF16, {hidden, 16}};
        map["patch_merge_mlp.0.weight"] = {DType::BF16, {16, 64}};
    }
    return map;
}

// Writes the tensors (deterministic byte patterns) as a sharded checkpoint (max_shard_bytes > 0) or a single
// model.safetensors, plus config.json.
inline void write_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config, const TensorMap& tensors,
                             std::uint64_t max_shard_bytes = 0) {
    SafetensorsWriter writer;
    std::uint8_t seed = 1;
    for (const auto& [name, tensor] : tensors) {
        std::size_t n = dtype_size(tensor.dtype);
        for (auto d : tensor.shape) {
            n *= static_cast<std::size_t>(d);
        }
        std::vector<std::uint8_t> bytes(n);
        for (std::size_t i = 0; i < n; ++i) {
            bytes[i] = static_cast<std::uint8_t>(seed + i * 13);
        }
        ++seed;
        writer.add(name, tensor.dtype, tensor.shape, bytes);
    }
    if (max_shard_bytes > 0) {
        writer.write_sharded(dir, max_shard_bytes);
    } else {
        writer.write(dir / "model.safetensors");
    }
    std::ofstream(dir / "config.json") << config.dump(2);
}

// A small flat config of the family: 4 layers (dense layer 0, MoE 1-3; MSA 2-3), 64 hidden, 4/2 heads of 32,
// 4 experts of 32 (top-2) + a shared expert of 64, vocab 96. Sizes are multiples of 32 so that MXFP8 and NVFP4
// blocks fit.
inline nlohmann::json small_config() {
    return nlohmann::json{{"architectures", {"MiniMaxM3SparseForCausalLM"}},
                          {"model_type", "minimax_m3"},
                          {"dtype", "bfloat16"},
                          {"hidden_size", 64},
                          {"intermediate_size", 32},
                          {"num_hidden_layers", 4},
                          {"num_attention_heads", 4},
                          {"num_key_value_heads", 2},
                          {"head_dim", 32},
                          {"vocab_size", 96},
                          {"max_position_embeddings", 8192},
                          {"rms_norm_eps", 1e-6},
                          {"use_gemma_norm", true},
                          {"rope_theta", 10000.0},
                          {"rotary_dim", 16},
                          {"partial_rotary_factor", 0.5},
                          {"hidden_act", "swigluoai"},
                          {"use_qk_norm", true},
                          {"qk_norm_type", "per_head"},
                          {"tie_word_embeddings", false},
                          {"dense_intermediate_size", 96},
                          {"shared_intermediate_size", 64},
                          {"num_local_experts", 4},
                          {"num_experts_per_tok", 2},
                          {"n_shared_experts", 1},
                          {"scoring_func", "sigmoid"},
                          {"use_routing_bias", true},
                          {"routed_scaling_factor", 2.0},
                          {"moe_layer_freq", {0, 1, 1, 1}},
                          {"sparse_attention_config",
                           {{"use_sparse_attention", true},
                            {"sparse_index_dim", 32},
                            {"sparse_num_index_heads", 2},
                            {"sparse_topk_blocks", 4},
                            {"sparse_block_size", 128},
                            {"sparse_score_type", "max"},
                            {"sparse_init_block", 0},
                            {"sparse_local_block", 1},
                            {"sparse_attention_freq", {0, 0, 1, 1}}}}};
}

}  // namespace msa::test
