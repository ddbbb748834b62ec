// Portable GEMM paths (no SIMD): used when AVX2 is unavailable or MSA_FORCE_SCALAR=1. Each weight row is dequantised
// exactly (weight_dequant.h) and dotted in plain K order.
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/weight_dequant.h"

#include <vector>

namespace msa::cpu {

void gemm_float_scalar(const GemmJob& job) {
    const std::int64_t K = job.w->cols;
    std::vector<float> row(static_cast<std::size_t>(K));
    for (std::int64_t n = job.n0; n < job.n1; ++n) {
        // The NVFP4 global scale multiplies the finished dot product, as in the AVX2 path.
        const float post = dequantize_weight_row(*job.w, n, row.data());
        for (std::int64_t i = 0; i < job.m; ++i) {
            const float* x = job.x + i * K;
            float s = 0.0f;
            for (std::int64_t k = 0; k < K; ++k) s += x[k] * row[static_cast<std::size_t>(k)];
            job.y[i * job.ldy + n] = s * post;
        }
    }
}

void gemm_nvfp4_q8_scalar(const GemmJob& job, const Q8Rows& xq) {
    const std::int64_t K = job.w->cols;
    const std::int64_t groups = K / 16;
    for (std::int64_t n = job.n0; n < job.n1; ++n) {
        const auto* wq = static_cast<const std::uint8_t*>(job.w->data) + n * (K / 2);
        const std::uint8_t* ws = job.w->scales + n * groups;
        for (std::int64_t i = 0; i < job.m; ++i) {
            float s = 0.0f;
            const std::int8_t* q = xq.q.data() + i * K;
            for (std::int64_t g = 0; g < groups; ++g) {
                std::int32_t dot = 0;
                const Q8GroupSlots slot = q8_group_slots(g, K);
                for (int b = 0; b < 8; ++b) {  // byte b holds elements 2b (low nibble) and 2b+1 (high nibble)
                    const std::uint8_t byte = wq[g * 8 + b];
                    dot += kE2m1Doubled[byte & 0x0F] * q[slot.lo + b] + kE2m1Doubled[byte >> 4] * q[slot.hi + b];
                }
                s += static_cast<float>(dot) * ((0.5f * e4m3_value(ws[g])) * xq.d[static_cast<std::size_t>(i * groups + g)]);
            }
            job.y[i * job.ldy + n] = s * job.w->global_scale * xq.row_mul[static_cast<std::size_t>(i)];
        }
    }
}

}  // namespace msa::cpu
