// Float-activation GEMM for MXFP8 weights (E4M3 values, one UE8M0 scale per 32 along K) on AVX2/FMA/F16C.
//
// E4M3 -> float without a table: the E4M3 bits (b & 0x7F) << 7 are an FP16 number equal to the E4M3 value times
// 2^-8, normals and subnormals alike; F16C converts 8 of them at once. The 2^8 is folded into the block scale, so
// the weight is e4m3 * 2^(e - 127) exactly.
#include "kernels/cpu/gemm_avx2.h"

#include <bit>

namespace msa::cpu {
namespace {

struct Mxfp8Loader {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::size_t ld;  // K
    __m256 load(std::int64_t n, std::int64_t k) const {
        const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + n * ld + k)));
        const __m128i mag = _mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(0x3F80));
        const __m128i sign = _mm_and_si128(_mm_slli_epi16(b, 8), _mm_set1_epi16(static_cast<short>(0x8000)));
        const __m256 v = _mm256_cvtph_ps(_mm_or_si128(mag, sign));
        return _mm256_mul_ps(v, _mm256_set1_ps(block_factor(scales[n * (ld / 32) + k / 32])));
    }
    float scalar(std::int64_t, std::int64_t) const { return 0.0f; }  // K is a multiple of 32: no tail

    // 2^(e - 127) * 2^8 as a float. Codes whose factor leaves the float range give inf/0 (never in real weights).
    static float block_factor(std::uint8_t e) {
        const int exp = static_cast<int>(e) - 127 + 8;
        if (exp > 127) return std::bit_cast<float>(0x7F800000u);
        if (exp < -126) return 0.0f;
        return std::bit_cast<float>(static_cast<std::uint32_t>(exp + 127) << 23);
    }
};

}  // namespace

void gemm_mxfp8_avx2(const GemmJob& job) {
    avx2::gemm_rows(job,
                    Mxfp8Loader{static_cast<const std::uint8_t*>(job.w->data), job.w->scales,
                                static_cast<std::size_t>(job.w->cols)},
                    1.0f);
}

}  // namespace msa::cpu
