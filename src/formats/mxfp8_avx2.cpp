// AVX2 MXFP8 quantiser and dequantiser, one 32-value block per step; equal to the scalar code of mxfp8.cpp.
#include <immintrin.h>

#include "formats/bulk_avx2.h"
#include "formats/format_tables.h"
#include "formats/mxfp8.h"
#include "formats/simd_avx2.h"

namespace msa::avx2 {

void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales) {
    for (std::size_t b = 0; b < n / kMxfp8BlockSize; ++b) {
        const float* block = x + b * kMxfp8BlockSize;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
            v[j] = _mm256_loadu_ps(block + 8 * j);
            amax = _mm256_max_ps(amax, abs_or_zero_if_nan(v[j]));
        }
        const std::uint8_t scale_code = mxfp8_scale_code(horizontal_max(amax));
        const __m256 inverse_scale = _mm256_set1_ps(mxfp8_inverse_scale(scale_code));
        std::uint8_t* out = values + b * kMxfp8BlockSize;
        for (int j = 0; j < 4; j += 2) {
            const __m256i lo = float_to_e4m3x8_saturate(_mm256_mul_ps(v[j], inverse_scale));
            const __m256i hi = float_to_e4m3x8_saturate(_mm256_mul_ps(v[j + 1], inverse_scale));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * j), pack_u32x16_to_u8(lo, hi));
        }
        scales[b] = scale_code;
    }
}

void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out) {
    for (std::size_t b = 0; b < n / kMxfp8BlockSize; ++b) {
        const __m256 scale = _mm256_set1_ps(kUE8M0ToFloat[scales[b]]);
        for (std::size_t j = 0; j < kMxfp8BlockSize; j += 16) {
            const std::size_t i = b * kMxfp8BlockSize + j;
            __m256 lo, hi;
            e4m3x16_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values + i)), lo, hi);
            _mm256_storeu_ps(out + i, _mm256_mul_ps(lo, scale));
            _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(hi, scale));
        }
    }
}

}  // namespace msa::avx2
