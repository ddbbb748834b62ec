// AVX2 NVFP4 quantiser and dequantisers, one 16-value block per step; equal to the scalar code of nvfp4.cpp.
#include <immintrin.h>

#include "formats/bulk_avx2.h"
#include "formats/format_tables.h"
#include "formats/nvfp4.h"
#include "formats/simd_avx2.h"

namespace msa::avx2 {

void nvfp4_quantize(const float* x, std::size_t n, float multiplier, std::uint8_t* packed, std::uint8_t* scales) {
    const __m256 m = _mm256_set1_ps(multiplier);
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const float* block = x + b * kNvfp4BlockSize;
        const __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(block), m);
        const __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(block + 8), m);
        const float amax = horizontal_max(_mm256_max_ps(abs_or_zero_if_nan(lo), abs_or_zero_if_nan(hi)));
        const std::uint8_t scale_code = nvfp4_scale_code(amax);
        const __m256 scale = _mm256_set1_ps(kE4M3ToFloat[scale_code]);
        const __m256i codes_lo = float_to_e2m1x8(_mm256_div_ps(lo, scale));  // true division, as the reference
        const __m256i codes_hi = float_to_e2m1x8(_mm256_div_ps(hi, scale));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + b * kNvfp4BlockSize / 2),
                         nvfp4_pack16(pack_u32x16_to_u8(codes_lo, codes_hi)));
        scales[b] = scale_code;
    }
}

void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float global_scale,
                      float* out) {
    const __m256 global = _mm256_set1_ps(global_scale);
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const __m128i codes = nvfp4_unpack16(packed + b * kNvfp4BlockSize / 2);
        const __m256 scale = _mm256_set1_ps(kE4M3ToFloat[scales[b]]);
        const __m256 lo = e2m1x8_to_float(_mm256_cvtepu8_epi32(codes));
        const __m256 hi = e2m1x8_to_float(_mm256_cvtepu8_epi32(_mm_srli_si128(codes, 8)));
        float* dst = out + b * kNvfp4BlockSize;
        _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_mul_ps(lo, scale), global));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_mul_ps(hi, scale), global));
    }
}

void nvfp4_dequantize_to_e4m3(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n,
                              std::uint8_t* out_e4m3) {
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const __m128i products = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kNvfp4E4M3Product[scales[b]].data()));
        const __m128i codes = nvfp4_unpack16(packed + b * kNvfp4BlockSize / 2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out_e4m3 + b * kNvfp4BlockSize), _mm_shuffle_epi8(products, codes));
    }
}

}  // namespace msa::avx2
