// MoE router (model.md sections 1 and 7): s = sigmoid(logits); choose top_k experts by s + e_score_correction_bias
// (ties to the lower expert id); weights = the chosen s divided by their plain sum, times routed_scaling_factor.
#pragma once

#include <cstdint>

namespace msa::cpu {

// logits: [rows][num_experts] FP32; bias: [num_experts] (may be null: zero). Writes ids and weights [rows][top_k],
// best first.
void route_experts(const float* logits, const float* bias, std::int64_t rows, int num_experts, int top_k,
                   float routed_scaling_factor, std::int32_t* ids, float* weights);

}  // namespace msa::cpu
