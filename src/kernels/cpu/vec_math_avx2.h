// Vector math for AVX2 kernels (include only from *_avx2.cpp and *_avx512.cpp files). The functions have internal
// linkage: files compiled with different instruction sets (AVX2, AVX-512) must not share an out-of-line copy,
// which the linker could otherwise pick for both.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace msa::cpu::avx2 {
namespace {

// Fixed-order horizontal sum (every kernel uses this one, so equal accumulators give equal sums).
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Eight E4M3 codes -> floats times 2^-8: sign-extend to 16 bits, shift left by 7 and clear bit 14, which gives the
// FP16 number s.0eeee.mmm0000000 = the E4M3 value * 2^-8 for normals and subnormals alike; F16C converts it.
inline __m256 e4m3x8_times_2e_8(const std::uint8_t* codes) {
    const __m128i b = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(static_cast<short>(0xBF80))));
}

// e^x, relative error about 1 ulp over the float range: x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2),
// e^r by a degree-6 minimax polynomial, times 2^n built in the exponent bits. Below -87.3 the result is 0
// (including x = -inf); above 88.7 it is +inf.
inline __m256 exp(__m256 x) {
    const __m256 hi_limit = _mm256_set1_ps(88.7228391f);
    const __m256 lo_limit = _mm256_set1_ps(-87.3365479f);
    const __m256 underflow = _mm256_cmp_ps(x, lo_limit, _CMP_LT_OQ);
    const __m256 overflow = _mm256_cmp_ps(x, hi_limit, _CMP_GT_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, hi_limit), lo_limit);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n: n in [-126, 128]; split as 2^(n/2) * 2^(n - n/2) so that n = 128 (x near the top) stays finite.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_andnot_ps(underflow, y);
    return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), overflow);
}

// The nearest E4M3 value (RNE, saturating at +-448) of each lane, as floats; see fp_tables.h round_to_e4m3.
inline __m256 round_to_e4m3(__m256 x) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    const __m256 sign = _mm256_and_ps(x, sign_mask);
    const __m256 a = _mm256_andnot_ps(sign_mask, x);
    // Normal range: keep 3 mantissa bits, ties to even.
    __m256i bits = _mm256_castps_si256(a);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 20), _mm256_set1_epi32(1));
    bits = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), odd));
    bits = _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0xFFF00000u)));
    const __m256 normal = _mm256_castsi256_ps(bits);
    // Subnormal range (below 2^-6): multiples of 2^-9.
    const __m256 sub = _mm256_mul_ps(
        _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
        _mm256_set1_ps(1.0f / 512.0f));
    __m256 r = _mm256_blendv_ps(normal, sub, _mm256_cmp_ps(a, _mm256_set1_ps(0.015625f), _CMP_LT_OQ));
    r = _mm256_min_ps(r, _mm256_set1_ps(448.0f));
    return _mm256_or_ps(r, sign);
}

}  // namespace
}  // namespace msa::cpu::avx2
