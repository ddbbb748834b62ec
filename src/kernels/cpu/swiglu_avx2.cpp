// swigluoai eight values at a time, with the polynomial exp of vec_math_avx2.h (about 1 ulp; the scalar version
// calls std::exp). Decode runs it over every active expert's intermediate row between two parallel regions, so it
// sits on the serial path of each MoE layer.
#include "kernels/cpu/swiglu.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {

void swigluoai_avx2(const float* gate, const float* up, std::int64_t n, float* out) {
    const __m256 limit = _mm256_set1_ps(7.0f), neg_limit = _mm256_set1_ps(-7.0f);
    const __m256 one = _mm256_set1_ps(1.0f), neg_alpha = _mm256_set1_ps(-1.702f);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_min_ps(_mm256_loadu_ps(gate + i), limit);
        const __m256 u = _mm256_max_ps(_mm256_min_ps(_mm256_loadu_ps(up + i), limit), neg_limit);
        const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, avx2::exp(_mm256_mul_ps(neg_alpha, g))));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, sig), _mm256_add_ps(u, one)));
    }
    for (; i < n; ++i) {
        const float g = std::min(gate[i], 7.0f);
        const float u = std::clamp(up[i], -7.0f, 7.0f);
        const float sig = 1.0f / (1.0f + std::exp(-1.702f * g));
        out[i] = g * sig * (u + 1.0f);
    }
}

}  // namespace msa::cpu
