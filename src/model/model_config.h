// ModelConfig: a MiniMax-M3-family `config.json` (model.md) parsed into typed fields and validated.
//
// Two layouts are accepted: the VL wrapper of the public checkpoints (text fields under `text_config`,
// `quantization_config` at the top level) and a flat text-only config (everything at the top level).
// Field names are those of the real config. A field the engine needs is required: when it is absent or has the
// wrong type, parsing throws msa::Error naming the field by its JSON path (e.g.
// "config.json: text_config.sparse_attention_config.sparse_topk_blocks is missing"). Fields that only some configs
// carry are optional with the default written next to them below; unknown fields are ignored (HF configs carry
// many that do not affect the text model).
#pragma once

#include "formats/kv_cache_dtype.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

// `text_config.sparse_attention_config` (msa.md). Absent: no layer uses MSA.
struct SparseAttentionConfig {
    // Absent config or `use_sparse_attention: false`: every layer is dense.
    bool use_sparse_attention = false;
    int index_dim = 0;        // sparse_index_dim; must equal head_dim
    int num_index_heads = 0;  // sparse_num_index_heads; must equal num_key_value_heads (index head g -> KV group g)
    int topk_blocks = 0;      // sparse_topk_blocks (16 in M3), >= 1
    int block_size = 0;       // sparse_block_size (128 in M3), a positive multiple of 16
    std::string score_type;   // sparse_score_type; only "max" is defined
    int init_block = 0;       // sparse_init_block; optional, must be 0
    int local_block = 1;      // sparse_local_block; optional, must be 1
    // sparse_attention_freq: 1 = MSA layer, 0 = dense attention; length num_hidden_layers. Required when
    // use_sparse_attention is true.
    std::vector<int> attention_freq;
    // sparse_disable_index_value: optional, no effect on inference (model.md section 7); when present its length
    // must be num_hidden_layers and its values 0/1. Empty when absent.
    std::vector<int> disable_index_value;
};

// Top-level `quantization_config`. Informative except for our own two fields: the format of each linear weight is
// decided per tensor from what the checkpoint stores (model.md section 7).
struct QuantizationConfig {
    bool present = false;
    std::string quant_method;                 // "mxfp8", "modelopt", ... (optional, empty when absent)
    std::string activation_scheme;            // "dynamic" (optional)
    std::vector<int> weight_block_size;       // [1, 32] for MXFP8 (optional)
    std::vector<std::string> ignored_layers;  // informative only
    // Ours: default KV-cache dtype ("NVFP4" | "FP8" | absent = BF16). The --kv-cache-dtype flag overrides it.
    std::optional<KvCacheDtype> kv_cache_quant_algo;
    // Ours: "nvfp4_row_scaled" turns on M3.1's W4A4 activation quantisation of the routed experts.
    bool moe_activation_nvfp4_row_scaled = false;
};

struct ModelConfig {
    // Where the text fields were found: "text_config." for the VL wrapper, "" for a flat config. Error messages
    // and `msa info` use it to name fields.
    std::string text_prefix;
    std::string model_type;                  // top-level model_type (optional, informative)
    std::vector<std::string> architectures;  // text architectures if present, else top-level (optional)
    std::string dtype;                       // "dtype" or legacy "torch_dtype" (optional; "bfloat16" in M3)

    // ---- shapes (all required) ----
    int hidden_size = 0;
    int num_hidden_layers = 0;  // at most 4096
    int num_attention_heads = 0;
    int num_key_value_heads = 0;  // divides num_attention_heads
    int head_dim = 0;             // a multiple of 16 (NVFP4 KV blocks)
    int vocab_size = 0;
    std::int64_t max_position_embeddings = 0;

    // ---- norms and positions ----
    double rms_norm_eps = 0;                // required
    bool use_gemma_norm = true;             // required; only the Gemma form (x * rsqrt(...) * (1 + w)) exists
    bool use_qk_norm = true;                // required
    std::string qk_norm_type = "per_head";  // required when use_qk_norm; only "per_head"
    double rope_theta = 0;                  // required
    // rotary_dim and/or partial_rotary_factor (at least one). rotary_dim wins; when both are given they must agree
    // (rotary_dim == partial_rotary_factor * head_dim). Even, 2 .. head_dim.
    int rotary_dim = 0;
    std::optional<double> partial_rotary_factor;
    bool attention_output_gate = false;  // optional (default false); true is rejected (not in the model)
    bool tie_word_embeddings = false;    // optional (default false: M3 ships an untied lm_head)

    // ---- feed-forward ----
    std::string hidden_act;       // required; only "swigluoai"
    double swiglu_alpha = 1.702;  // optional, default of model.md section 1
    double swiglu_limit = 7.0;    // optional, default of model.md section 1
    // moe_layer_freq: 1 = MoE layer, 0 = dense MLP; length num_hidden_layers. Optional: absent means every layer is
    // dense (a dense-only config).
    std::vector<int> moe_layer_freq;
    int dense_intermediate_size = 0;  // required when any layer is dense
    // MoE fields: required when any layer is MoE, else 0/defaults.
    int intermediate_size = 0;  // width of one routed expert
    int num_local_experts = 0;
    int num_experts_per_tok = 0;       // 1 .. num_local_experts
    int n_shared_experts = 0;          // 0 or 1
    int shared_intermediate_size = 0;  // required when n_shared_experts == 1
    std::string scoring_func;          // only "sigmoid"
    bool use_routing_bias = false;     // e_score_correction_bias present
    double routed_scaling_factor = 1.0;

    // ---- attention kind per layer ----
    SparseAttentionConfig sparse;

    // ---- ignored by inference, kept for `msa info` ----
    int num_mtp_modules = 0;  // optional; no MTP weights are used
    std::optional<std::int64_t> image_token_index;
    std::optional<std::int64_t> video_token_index;

    QuantizationConfig quantization;

    // ---- derived helpers ----
    bool is_msa_layer(int layer) const;  // MSA (sparse) attention, else dense attention
    bool is_moe_layer(int layer) const;  // MoE FFN, else dense MLP
    int num_msa_layers() const;
    int num_moe_layers() const;
    int gqa_ratio() const { return num_attention_heads / num_key_value_heads; }
    std::int64_t q_dim() const { return std::int64_t{num_attention_heads} * head_dim; }
    std::int64_t kv_dim() const { return std::int64_t{num_key_value_heads} * head_dim; }
    // Rows of index_q_proj (num_index_heads x index_dim); 0 without MSA.
    std::int64_t index_q_dim() const;
    // KV dtype used when the user does not choose one: quantization_config.kv_cache_quant_algo, else BF16.
    KvCacheDtype default_kv_cache_dtype() const;
    // Bytes per token of the KV cache over all layers, one full copy (TP1): K and V of every layer, and the index
    // keys (one head of index_dim) of the MSA layers.
    std::uint64_t kv_bytes_per_token(KvCacheDtype dtype) const;
    std::uint64_t index_k_bytes_per_token(KvCacheDtype dtype) const;
};

// Parses config JSON text. `source` names the file in error messages ("config.json", a path).
ModelConfig parse_model_config(std::string_view json_text, std::string_view source);
// Parses an already-parsed JSON document.
ModelConfig model_config_from_json(const nlohmann::json& document, std::string_view source);
// Reads `path`, or `path/config.json` when `path` is a directory.
ModelConfig load_model_config(const std::string& path);

}  // namespace msa
