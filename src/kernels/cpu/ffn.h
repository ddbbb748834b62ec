// Feed-forward blocks on the CPU: the swigluoai expert/MLP and the MoE layer (router, routed experts grouped by
// expert, shared expert). Each token's output depends only on its own row.
#pragma once

#include "kernels/backend.h"

#include <cstdint>

namespace msa::cpu {

// out = w2(swigluoai(w1 x, w3 x)) with float activations (the dense MLP).
void expert_forward(const ExpertWeightsView& w, const float* x, std::int64_t m, float* out, ActivationMode mode);

// MoE: out[t] = sum over the token's top-k experts (best first) of weight * expert(x[t]), then + shared(x[t]).
// With layer.w4a4 (M3.1 routed experts) the w1/w3 input is quantised to NVFP4 with the per-row scale 2688/amax and
// the w2 input with the fixed scale 16 (model.md section 4); the routed experts' weights must then be NVFP4.
void moe_forward(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode);

}  // namespace msa::cpu
