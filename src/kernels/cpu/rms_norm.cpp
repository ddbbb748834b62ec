#include "kernels/cpu/rms_norm.h"

#include "core/parallel.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {

void gemma_rms_norm(const float* x, const float* w, std::int64_t rows, std::int64_t dim, float eps, float* y) {
    const std::size_t grain = static_cast<std::size_t>(std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(dim, 1)));
    parallel_for(static_cast<std::size_t>(rows), grain, [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            const float* xr = x + r * static_cast<std::size_t>(dim);
            float* yr = y + r * static_cast<std::size_t>(dim);
            double ss = 0.0;
            for (std::int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
            const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
            for (std::int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
        }
    });
}

}  // namespace msa::cpu
