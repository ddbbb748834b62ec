#include "kernels/cpu/gemm_nt.h"

#include "core/cpu_features.h"

namespace msa::cpu {

void gemm_nt_f32_avx2(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                      std::int64_t m, std::int64_t n, std::int64_t k);

void gemm_nt_f32(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                 std::int64_t m, std::int64_t n, std::int64_t k) {
    if (cpu_features().avx2) {
        gemm_nt_f32_avx2(a, lda, b, ldb, c, ldc, m, n, k);
        return;
    }
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (std::int64_t t = 0; t < k; ++t) s += a[i * lda + t] * b[j * ldb + t];
            c[i * ldc + j] = s;
        }
}

}  // namespace msa::cpu
