// Float-activation GEMM for unquantised weights (F32, F16, BF16) on AVX2/FMA/F16C.
#include "kernels/cpu/gemm_avx2.h"

namespace msa::cpu {
namespace {

// 16-bit floats: BF16 is the top half of an FP32, F16 goes through F16C.
struct Bf16 {
    static __m256 x8(const std::uint16_t* p) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float one(std::uint16_t v) {
        const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
        float f;
        __builtin_memcpy(&f, &bits, 4);
        return f;
    }
};

struct F16 {
    static __m256 x8(const std::uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float one(std::uint16_t v) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v))); }
};

template <class Type>
struct U16Loader {
    const std::uint16_t* w;
    std::size_t ld;
    static constexpr int kBlock = 32;
    static constexpr int kPrefetchEvery = 32;
    using Row = const std::uint16_t*;
    using Scale = avx2::NoScale;
    Row row(std::int64_t n) const { return w + n * ld; }
    Scale block_scale(Row, std::int64_t) const { return {}; }
    __m256 chunk(Row r, Scale, std::int64_t k, int c) const { return Type::x8(r + k + 8 * c); }
    const char* address(std::int64_t n, std::int64_t k) const { return reinterpret_cast<const char*>(w + n * ld + k); }
    __m256 load(std::int64_t n, std::int64_t k) const { return Type::x8(w + n * ld + k); }
    float scalar(std::int64_t n, std::int64_t k) const { return Type::one(w[n * ld + k]); }
};

}  // namespace

void gemm_f32_avx2(const GemmJob& job) {
    avx2::gemm_rows(job, avx2::F32Loader{static_cast<const float*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

void gemm_f16_avx2(const GemmJob& job) {
    avx2::gemm_rows(job, U16Loader<F16>{static_cast<const std::uint16_t*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

void gemm_bf16_avx2(const GemmJob& job) {
    avx2::gemm_rows(job,
                    U16Loader<Bf16>{static_cast<const std::uint16_t*>(job.w->data), static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

}  // namespace msa::cpu
