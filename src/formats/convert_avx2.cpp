// AVX2/F16C bulk conversions (compiled with AVX2 flags; called only when cpu_features().avx2). Full vectors go
// through the helpers of simd_avx2.h, the tail through the scalar reference functions.
#include <immintrin.h>

#include "formats/bulk_avx2.h"
#include "formats/scalar_formats.h"
#include "formats/simd_avx2.h"

namespace msa::avx2 {

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, bf16x8_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    }
    for (; i < n; ++i) out[i] = msa::bf16_to_float(in[i]);
}

void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), float_to_bf16x8(_mm256_loadu_ps(in + i)));
    }
    for (; i < n; ++i) out[i] = msa::float_to_bf16(in[i]);
}

void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    }
    for (; i < n; ++i) out[i] = msa::fp16_to_float(in[i]);
}

void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), half);
    }
    for (; i < n; ++i) out[i] = msa::float_to_fp16(in[i], Overflow::ieee);
}

void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 lo, hi;
        e4m3x16_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)), lo, hi);
        _mm256_storeu_ps(out + i, lo);
        _mm256_storeu_ps(out + i + 8, hi);
    }
    for (; i < n; ++i) out[i] = msa::e4m3_to_float(in[i]);
}

void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i lo = float_to_e4m3x8_saturate(_mm256_loadu_ps(in + i));
        const __m256i hi = float_to_e4m3x8_saturate(_mm256_loadu_ps(in + i + 8));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), pack_u32x16_to_u8(lo, hi));
    }
    for (; i < n; ++i) out[i] = msa::float_to_e4m3(in[i], Overflow::saturate);
}

void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 lo, hi;
        e5m2x16_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)), lo, hi);
        _mm256_storeu_ps(out + i, lo);
        _mm256_storeu_ps(out + i + 8, hi);
    }
    for (; i < n; ++i) out[i] = msa::e5m2_to_float(in[i]);
}

void float_to_e5m2(const float* in, std::uint8_t* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i lo = float_to_e5m2x8_saturate(_mm256_loadu_ps(in + i));
        const __m256i hi = float_to_e5m2x8_saturate(_mm256_loadu_ps(in + i + 8));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), pack_u32x16_to_u8(lo, hi));
    }
    for (; i < n; ++i) out[i] = msa::float_to_e5m2(in[i], Overflow::saturate);
}

void bf16_to_e4m3(const std::uint16_t* in, std::uint8_t* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 lo = bf16x8_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
        const __m256 hi = bf16x8_to_float(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 8)));
        const __m128i codes = pack_u32x16_to_u8(float_to_e4m3x8_saturate(lo), float_to_e4m3x8_saturate(hi));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), codes);
    }
    for (; i < n; ++i) out[i] = msa::float_to_e4m3(msa::bf16_to_float(in[i]), Overflow::saturate);
}

}  // namespace msa::avx2
