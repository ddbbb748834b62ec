// Exact dequantisation of weight rows to FP32 (scalar; used by the portable GEMM path, embeddings and tests).
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>

namespace msa::cpu {

// Writes W[n][0..K) to out, except that an NVFP4 row is written without its global scale, which is returned
// instead (1 for every other format): out * returned = the weight row.
float dequantize_weight_row(const WeightView& w, std::int64_t n, float* out);

// The full row including the global scale.
void weight_row(const WeightView& w, std::int64_t n, float* out);

}  // namespace msa::cpu
