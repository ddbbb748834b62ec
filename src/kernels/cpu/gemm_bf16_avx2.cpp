// Float-activation GEMM for unquantised weights (F32, F16, BF16) on AVX2/FMA/F16C.
#include "kernels/cpu/gemm_avx2.h"

namespace msa::cpu {
namespace {

struct Bf16Loader {
    const std::uint16_t* w;
    std::size_t ld;
    __m256 load(std::int64_t n, std::int64_t k) const {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + n * ld + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    float scalar(std::int64_t n, std::int64_t k) const {
        const std::uint32_t bits = static_cast<std::uint32_t>(w[n * ld + k]) << 16;
        float f;
        __builtin_memcpy(&f, &bits, 4);
        return f;
    }
};

struct F16Loader {
    const std::uint16_t* w;
    std::size_t ld;
    __m256 load(std::int64_t n, std::int64_t k) const {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + n * ld + k)));
    }
    float scalar(std::int64_t n, std::int64_t k) const {
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(w[n * ld + k])));
    }
};

}  // namespace

void gemm_f32_avx2(const GemmJob& job) {
    avx2::gemm_rows(job, avx2::F32Loader{static_cast<const float*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

void gemm_f16_avx2(const GemmJob& job) {
    avx2::gemm_rows(job, F16Loader{static_cast<const std::uint16_t*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

void gemm_bf16_avx2(const GemmJob& job) {
    avx2::gemm_rows(job,
                    Bf16Loader{static_cast<const std::uint16_t*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

}  // namespace msa::cpu
