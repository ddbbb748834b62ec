// Float-activation (exact) GEMM for NVFP4 weights on AVX2/FMA: E2M1 nibbles -> doubled integers with one pshufb,
// times half the block's E4M3 scale (exact in FP32), FMA with the activations; the global scale multiplies the
// finished dot product.
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm_avx2.h"

namespace msa::cpu {
namespace {

struct Nvfp4Loader {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::size_t ld;  // K
    const float* scale_table;
    // Eight weights from 4 bytes of codes, as doubled integers in element order (even elements in low nibbles).
    static __m256 doubled8(const std::uint8_t* p) {
        std::uint32_t four;
        __builtin_memcpy(&four, p, 4);
        const __m128i b = _mm_cvtsi32_si128(static_cast<int>(four));
        const __m128i mask = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(b, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
        const __m128i codes = _mm_unpacklo_epi8(lo, hi);
        const __m128i ints = _mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1Doubled)), codes);
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ints));
    }
    static constexpr int kBlock = 16;
    static constexpr int kPrefetchEvery = 128;
    struct Row {
        const std::uint8_t* w;
        const std::uint8_t* s;
    };
    using Scale = __m256;
    Row row(std::int64_t n) const { return {w + n * ld / 2, scales + n * (ld / 16)}; }
    Scale block_scale(const Row& r, std::int64_t k) const { return _mm256_set1_ps(0.5f * scale_table[r.s[k / 16]]); }
    __m256 chunk(const Row& r, Scale half_scale, std::int64_t k, int c) const {
        return _mm256_mul_ps(doubled8(r.w + (k + 8 * c) / 2), half_scale);
    }
    const char* address(std::int64_t n, std::int64_t k) const {
        return reinterpret_cast<const char*>(w + (n * ld + k) / 2);
    }
    __m256 load(std::int64_t n, std::int64_t k) const {
        const float half_scale = 0.5f * scale_table[scales[(n * ld + k) / 16]];
        return _mm256_mul_ps(doubled8(w + (n * ld + k) / 2), _mm256_set1_ps(half_scale));
    }
    float scalar(std::int64_t, std::int64_t) const { return 0.0f; }  // K is a multiple of 16: no tail
};

}  // namespace

void gemm_nvfp4_avx2(const GemmJob& job) {
    avx2::gemm_rows(job,
                    Nvfp4Loader{static_cast<const std::uint8_t*>(job.w->data), job.w->scales,
                                static_cast<std::size_t>(job.w->cols), e4m3_table()},
                    job.w->global_scale);
}

}  // namespace msa::cpu
