// The `swigluoai` activation (model.md section 1), used by the dense MLP, the routed experts and the shared expert:
// g = min(gate, 7), u = clamp(up, -7, 7), out = g * sigmoid(1.702 * g) * (u + 1).
#pragma once

#include <cstdint>

namespace msa::cpu {

// gate, up, out: [n] (out may alias gate or up). With AVX2 the exponential is vec_math_avx2.h's (about 1 ulp), so
// results may differ from the scalar version's in the last bits.
void swigluoai(const float* gate, const float* up, std::int64_t n, float* out);

}  // namespace msa::cpu
