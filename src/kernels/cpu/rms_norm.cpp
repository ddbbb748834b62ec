#include "kernels/cpu/rms_norm.h"

#include "core/parallel.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {

void gemma_rms_norm(const float* x, const float* w, std::int64_t rows, std::int64_t dim, float eps, float* y) {
    const std::size_t grain = static_cast<std::size_t>(std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(dim, 1)));
    const auto d = static_cast<std::size_t>(dim);
    auto scale_row = [&](std::size_t r, double ss) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
        for (std::int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
    };
    parallel_for(static_cast<std::size_t>(rows), grain, [&](std::size_t begin, std::size_t end) {
        // Each row's sum of squares is one chain of float64 adds in column order (that order is the result); four
        // rows' chains advance together so that their adds overlap (the per-head norms: a decode token's 8-64 short
        // rows were one add latency per value). Every chain still adds its own row's values in its own order.
        std::size_t r = begin;
        for (; r + 4 <= end; r += 4) {
            const float* x0 = x + r * d;
            const float* x1 = x0 + d;
            const float* x2 = x1 + d;
            const float* x3 = x2 + d;
            double ss0 = 0.0, ss1 = 0.0, ss2 = 0.0, ss3 = 0.0;
            for (std::size_t i = 0; i < d; ++i) {
                ss0 += static_cast<double>(x0[i]) * x0[i];
                ss1 += static_cast<double>(x1[i]) * x1[i];
                ss2 += static_cast<double>(x2[i]) * x2[i];
                ss3 += static_cast<double>(x3[i]) * x3[i];
            }
            scale_row(r, ss0);
            scale_row(r + 1, ss1);
            scale_row(r + 2, ss2);
            scale_row(r + 3, ss3);
        }
        for (; r < end; ++r) {
            const float* xr = x + r * d;
            double ss = 0.0;
            for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
            scale_row(r, ss);
        }
    });
}

}  // namespace msa::cpu
