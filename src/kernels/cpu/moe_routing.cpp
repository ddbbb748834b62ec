#include "kernels/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace msa::cpu {

void route_experts(const float* logits, const float* bias, std::int64_t rows, int num_experts, int top_k,
                   float routed_scaling_factor, std::int32_t* ids, float* weights) {
    std::vector<float> s(static_cast<std::size_t>(num_experts));
    std::vector<float> biased(static_cast<std::size_t>(num_experts));
    std::vector<int> order(static_cast<std::size_t>(num_experts));
    for (std::int64_t r = 0; r < rows; ++r) {
        for (int e = 0; e < num_experts; ++e) {
            s[e] = 1.0f / (1.0f + std::exp(-logits[r * num_experts + e]));
            biased[e] = s[e] + (bias != nullptr ? bias[e] : 0.0f);
        }
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int a, int b) {
            return biased[a] > biased[b] || (biased[a] == biased[b] && a < b);
        });
        float sum = 0.0f;
        for (int k = 0; k < top_k; ++k) sum += s[order[k]];
        for (int k = 0; k < top_k; ++k) {
            ids[r * top_k + k] = order[k];
            weights[r * top_k + k] = s[order[k]] / sum * routed_scaling_factor;
        }
    }
}

}  // namespace msa::cpu
