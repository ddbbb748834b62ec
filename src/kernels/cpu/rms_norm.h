// Gemma RMSNorm (model.md section 1): y = x * rsqrt(mean(x^2) + eps) * (1 + w), one row at a time.
// Also serves the per-head q/k/index norms: a [tokens][heads][head_dim] tensor is tokens*heads rows of head_dim
// sharing one weight vector.
#pragma once

#include <cstdint>

namespace msa::cpu {

// x, y: [rows][dim] (may alias); w: [dim] (the stored weight, without the +1). Sum of squares in double.
void gemma_rms_norm(const float* x, const float* w, std::int64_t rows, std::int64_t dim, float eps, float* y);

}  // namespace msa::cpu
