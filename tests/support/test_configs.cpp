#include "support/test_configs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace msa::test {

std::string tiny_config_json(const TinyConfig& c) {
    std::string quant;
    if (!c.kv_cache_quant_algo.empty() || c.w4a4) {
        quant = ",\n  \"quantization_config\": {";
        std::string sep;
        if (!c.kv_cache_quant_algo.empty()) {
            quant += fmt::format("\"kv_cache_quant_algo\": \"{}\"", c.kv_cache_quant_algo);
            sep = ", ";
        }
        if (c.w4a4) quant += sep + "\"moe_activation_quant\": \"nvfp4_row_scaled\"";
        quant += "}";
    }
    return fmt::format(R"({{
  "model_type": "minimax_m3", "architectures": ["MiniMaxM3SparseForCausalLM"],
  "hidden_size": {}, "num_hidden_layers": {}, "num_attention_heads": {}, "num_key_value_heads": {},
  "head_dim": 128, "vocab_size": {}, "max_position_embeddings": 1048576,
  "rms_norm_eps": 1e-06, "use_gemma_norm": true, "use_qk_norm": true, "qk_norm_type": "per_head",
  "rope_theta": 5000000, "rotary_dim": 64, "hidden_act": "swigluoai", "attention_output_gate": false,
  "tie_word_embeddings": false,
  "moe_layer_freq": [{}], "dense_intermediate_size": {}, "intermediate_size": {},
  "num_local_experts": {}, "num_experts_per_tok": {}, "n_shared_experts": {}, "shared_intermediate_size": {},
  "scoring_func": "sigmoid", "use_routing_bias": true, "routed_scaling_factor": 2.0,
  "sparse_attention_config": {{"use_sparse_attention": true, "sparse_index_dim": 128,
    "sparse_num_index_heads": {}, "sparse_topk_blocks": {}, "sparse_block_size": 128, "sparse_score_type": "max",
    "sparse_init_block": 0, "sparse_local_block": 1, "sparse_attention_freq": [{}]}}{}
}}
)",
                       c.hidden, c.msa.size(), c.heads, c.kv_heads, c.vocab, fmt::join(c.moe, ", "),
                       c.dense_intermediate, c.expert_intermediate, c.experts, c.experts_per_tok, c.shared_experts,
                       c.expert_intermediate, c.kv_heads, c.topk_blocks, fmt::join(c.msa, ", "), quant);
}

}  // namespace msa::test
