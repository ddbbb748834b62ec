// config.json texts of small MiniMax-M3-family models for the model tests (flat, text-only layout).
#pragma once

#include <string>
#include <vector>

namespace msa::test {

struct TinyConfig {
    int hidden = 128;
    int heads = 4;
    int kv_heads = 2;
    int vocab = 320;
    std::vector<int> msa = {0, 1, 1};  // sparse_attention_freq per layer
    std::vector<int> moe = {0, 1, 1};  // moe_layer_freq per layer
    int topk_blocks = 3;
    int experts = 4;
    int experts_per_tok = 2;
    int shared_experts = 1;
    int dense_intermediate = 192;
    int expert_intermediate = 64;
    std::string kv_cache_quant_algo = "NVFP4";  // "" for BF16
    bool w4a4 = false;
};

std::string tiny_config_json(const TinyConfig& c);

}  // namespace msa::test
