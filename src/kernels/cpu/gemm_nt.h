// Small single-threaded FP32 products for attention and the indexer: c[i][j] = a[i] . b[j] over k values, both
// operands row-major with k contiguous. Each element is computed the same way whatever m and n are (the same
// 8-lane FMA order as the exact linear() path), so results never depend on how callers batch rows.
#pragma once

#include <cstdint>

namespace msa::cpu {

void gemm_nt_f32(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                 std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace msa::cpu
