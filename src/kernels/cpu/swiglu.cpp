#include "kernels/cpu/swiglu.h"

#include "core/cpu_features.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {

void swigluoai_avx2(const float* gate, const float* up, std::int64_t n, float* out);

void swigluoai(const float* gate, const float* up, std::int64_t n, float* out) {
    if (cpu_features().avx2) {
        swigluoai_avx2(gate, up, n, out);
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], 7.0f);
        const float u = std::clamp(up[i], -7.0f, 7.0f);
        const float sig = 1.0f / (1.0f + std::exp(-1.702f * g));
        out[i] = g * sig * (u + 1.0f);
    }
}

}  // namespace msa::cpu
