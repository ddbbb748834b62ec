// Internal interface between the linear() driver (linear.cpp) and the per-format GEMM paths (gemm_*.cpp,
// gemm_*_avx2.cpp). Not for use outside src/kernels/cpu.
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>

namespace msa::cpu {

// y[i][n] = sum_k x[i][k] * W[n][k] for i < m and n in [n0, n1); y has row stride ldy, x row stride W.cols.
struct GemmJob {
    const WeightView* w = nullptr;
    const float* x = nullptr;
    std::int64_t m = 0;
    float* y = nullptr;
    std::int64_t ldy = 0;
    std::int64_t n0 = 0;
    std::int64_t n1 = 0;
};

// Float activations: the exact path (FP32 products of the exactly dequantised weight, FP32 accumulation).
// Every output element is one dot product accumulated in 8 lanes in K order and reduced the same way, whatever
// m, n0 and n1 are: a token's result does not depend on the other tokens in the batch.
void gemm_float_scalar(const GemmJob& job);
void gemm_f32_avx2(const GemmJob& job);
void gemm_f16_avx2(const GemmJob& job);
void gemm_bf16_avx2(const GemmJob& job);
void gemm_mxfp8_avx2(const GemmJob& job);
void gemm_nvfp4_avx2(const GemmJob& job);
// The AVX2 kernels' results on AVX-512, bit for bit (jobs they do not cover go to the AVX2 kernel).
void gemm_bf16_avx512(const GemmJob& job);
void gemm_mxfp8_avx512(const GemmJob& job);

}  // namespace msa::cpu

namespace msa::cpu {

struct Q8Rows;

// Integer path for NVFP4 weights: y[i][n] = row_mul[i] * global * sum over groups g of
// (sum of q * 2*e2m1 over the group) * d[i][g] * scale[n][g] / 2. Row independent like the float path.
void gemm_nvfp4_q8_scalar(const GemmJob& job, const Q8Rows& xq);
void gemm_nvfp4_q8_avx2(const GemmJob& job, const Q8Rows& xq);
// The AVX2 kernel's results on AVX-512, bit for bit, for an even number of rows n1 - n0 and K a multiple of 128.
void gemm_nvfp4_q8_avx512(const GemmJob& job, const Q8Rows& xq);

}  // namespace msa::cpu
