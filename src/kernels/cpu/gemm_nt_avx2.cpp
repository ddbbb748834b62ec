#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_nt.h"

namespace msa::cpu {

void gemm_nt_f32_avx2(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                      std::int64_t m, std::int64_t n, std::int64_t k) {
    const avx2::F32Loader loader{b, static_cast<std::size_t>(ldb)};
    const std::int64_t k_vec = k / 8 * 8;
    for (std::int64_t i0 = 0; i0 < m; i0 += 4) {
        const int mr = static_cast<int>(std::min<std::int64_t>(4, m - i0));
        const int nr_max = avx2::tile_cols(mr);
        for (std::int64_t j = 0; j < n; j += nr_max) {
            const int nr = static_cast<int>(std::min<std::int64_t>(nr_max, n - j));
            __m256 acc[16];
            for (auto& v : acc) v = _mm256_setzero_ps();
            avx2::tile_dispatch(mr, nr, a + i0 * lda, static_cast<std::size_t>(lda), loader, j, 0, k_vec, acc);
            for (int r = 0; r < mr; ++r)
                for (int q = 0; q < nr; ++q)
                    c[(i0 + r) * ldc + j + q] =
                        avx2::finish(acc[r * nr + q], a + (i0 + r) * lda, loader, j + q, k_vec, k, 1.0f);
        }
    }
}

}  // namespace msa::cpu
