#include "kernels/bench_configs.h"

#include "core/error.h"

#include <fmt/format.h>

namespace msa::bench {
namespace {

std::string config_json(int hidden, int layers, int heads, int kv_heads, int vocab, int dense_inter, int experts,
                        int top_k, int expert_inter, int topk_blocks, bool w4a4) {
    std::string freq_moe, freq_msa;
    for (int l = 0; l < layers; ++l) {
        freq_moe += (l ? ", " : "") + std::string(l == 0 ? "0" : "1");
        freq_msa += (l ? ", " : "") + std::string(l == 0 ? "0" : "1");
    }
    return fmt::format(R"({{
  "model_type": "minimax_m3", "architectures": ["MiniMaxM3SparseForCausalLM"],
  "hidden_size": {0}, "num_hidden_layers": {1}, "num_attention_heads": {2}, "num_key_value_heads": {3},
  "head_dim": 128, "vocab_size": {4}, "max_position_embeddings": 1048576,
  "rms_norm_eps": 1e-06, "use_gemma_norm": true, "use_qk_norm": true, "qk_norm_type": "per_head",
  "rope_theta": 5000000, "rotary_dim": 64, "hidden_act": "swigluoai", "tie_word_embeddings": false,
  "moe_layer_freq": [{5}], "dense_intermediate_size": {6}, "intermediate_size": {7},
  "num_local_experts": {8}, "num_experts_per_tok": {9}, "n_shared_experts": 1, "shared_intermediate_size": {7},
  "scoring_func": "sigmoid", "use_routing_bias": true, "routed_scaling_factor": 2.0,
  "sparse_attention_config": {{"use_sparse_attention": true, "sparse_index_dim": 128, "sparse_num_index_heads": {3},
    "sparse_topk_blocks": {10}, "sparse_block_size": 128, "sparse_score_type": "max", "sparse_init_block": 0,
    "sparse_local_block": 1, "sparse_attention_freq": [{11}]}},
  "quantization_config": {{"kv_cache_quant_algo": "NVFP4"{12}}}
}}
)",
                       hidden, layers, heads, kv_heads, vocab, freq_moe, dense_inter, expert_inter, experts, top_k,
                       topk_blocks, freq_msa, w4a4 ? ", \"moe_activation_quant\": \"nvfp4_row_scaled\"" : "");
}

}  // namespace

BenchModel bench_model(const std::string& name) {
    BenchModel m;
    m.name = name;
    if (name == "tiny") {
        m.spec.config_json = config_json(256, 4, 4, 2, 4096, 768, 8, 2, 256, 4, false);
        m.prefill_tokens = 2048;
        m.decode_tokens = 64;
        return m;
    }
    if (name == "mid") {
        m.spec.config_json = config_json(2048, 8, 16, 4, 32768, 6144, 16, 4, 1024, 16, true);
        m.spec.attention_format = LinearFormat::mxfp8;
        m.spec.mlp_format = LinearFormat::mxfp8;
        m.spec.expert_format = LinearFormat::nvfp4;
        m.spec.max_shard_bytes = 256ull << 20;
        m.prefill_tokens = 1024;
        m.decode_tokens = 24;
        return m;
    }
    fail("unknown benchmark model '{}' (tiny or mid)", name);
}

}  // namespace msa::bench
