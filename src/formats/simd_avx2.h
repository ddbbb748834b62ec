// AVX2/F16C building blocks for the number formats, for kernels in files named *_avx2.cpp (compiled with
// -mavx2 -mfma -mf16c and called only when cpu_features().avx2 is true). Each helper equals the scalar functions
// of scalar_formats.h bit for bit, lane by lane; tests/formats checks them through the bulk converters.
#pragma once

#if !defined(__AVX2__) || !defined(__F16C__)
#error "formats/simd_avx2.h is for *_avx2.cpp files only (compiled with AVX2 and F16C enabled)"
#endif

#include <immintrin.h>

#include <cstdint>

namespace msa::avx2 {

// ---- BF16 --------------------------------------------------------------------------------------------------------

// 8 BF16 values (the low 128 bits of `bits`, as u16) -> 8 floats. Exact.
inline __m256 bf16x8_to_float(__m128i bits) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// 8 floats -> 8 BF16 values (u16 lanes of the result), as float_to_bf16.
inline __m128i float_to_bf16x8(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i is_nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
    const __m256i result = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(result), _mm256_extracti128_si256(result, 1));
}

// ---- 8-bit floats ------------------------------------------------------------------------------------------------

// 16 E4M3 codes -> 16 floats. E4M3 sits inside FP16 (same mantissa alignment, exponent bias 7 vs 15), so the code
// shifted into FP16 position is the value / 2^8; F16C widens it, one exact multiplication restores it.
inline void e4m3x16_to_float(__m128i codes, __m256& lo, __m256& hi) {
    const __m256i c = _mm256_cvtepu8_epi16(codes);
    const __m256i magnitude = _mm256_and_si256(c, _mm256_set1_epi16(0x7F));
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8);
    const __m256i is_nan = _mm256_cmpeq_epi16(magnitude, _mm256_set1_epi16(0x7F));
    const __m256i half =
        _mm256_or_si256(_mm256_blendv_epi8(_mm256_slli_epi16(magnitude, 7), _mm256_set1_epi16(0x7E00), is_nan), sign);
    const __m256 k2pow8 = _mm256_set1_ps(256.0f);
    lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), k2pow8);
    hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), k2pow8);
}

// 16 E5M2 codes -> 16 floats: an E5M2 code is the upper byte of an FP16.
inline void e5m2x16_to_float(__m128i codes, __m256& lo, __m256& hi) {
    const __m256i half = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(half));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1));
}

// Saturating round-to-nearest-even of 8 floats to a 1-E-M 8-bit format; codes in the 32-bit lanes. Mirrors
// detail::encode_minifloat with Overflow::saturate.
template <int kMantissaBits, int kExponentBias, std::uint32_t kMaxFiniteBits, std::uint32_t kNanCode>
inline __m256i encode_fp8_saturate(__m256 x) {
    constexpr int kDrop = 23 - kMantissaBits;
    constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(128 - kExponentBias) << 23;
    constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - kExponentBias) << kMantissaBits;
    const float units_per_one = static_cast<float>(1u << (kExponentBias - 1 + kMantissaBits));

    const __m256i bits = _mm256_castps_si256(x);
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(bits, 31), 7);
    const __m256i abs_bits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i is_nan = _mm256_cmpgt_epi32(abs_bits, _mm256_set1_epi32(0x7F800000));
    // Saturate first (infinities too): positive floats order like their bits. NaN lanes are replaced below.
    const __m256i magnitude = _mm256_min_epi32(abs_bits, _mm256_set1_epi32(static_cast<int>(kMaxFiniteBits)));

    // Normal range: round the float mantissa to kMantissaBits, then rebias the exponent.
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(magnitude, kDrop), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(magnitude, _mm256_set1_epi32((1 << (kDrop - 1)) - 1)), lsb), kDrop);
    const __m256i normal = _mm256_sub_epi32(rounded, _mm256_set1_epi32(static_cast<int>(kRebias)));
    // Subnormal range: the code counts units of the smallest subnormal; the scaling by a power of two is exact.
    const __m256 units = _mm256_mul_ps(_mm256_castsi256_ps(magnitude), _mm256_set1_ps(units_per_one));
    const __m256i subnormal = _mm256_cvtps_epi32(_mm256_round_ps(units, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(kMinNormalBits)), magnitude);

    __m256i code = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(static_cast<int>(kNanCode)), is_nan);
    return _mm256_or_si256(code, sign);
}

// float_to_e4m3(x, Overflow::saturate) for 8 lanes.
inline __m256i float_to_e4m3x8_saturate(__m256 x) {
    return encode_fp8_saturate<3, 7, 0x43E00000u, 0x7Fu>(x);
}
// float_to_e5m2(x, Overflow::saturate) for 8 lanes.
inline __m256i float_to_e5m2x8_saturate(__m256 x) {
    return encode_fp8_saturate<2, 15, 0x47600000u, 0x7Fu>(x);
}

// ---- E2M1 / NVFP4 ------------------------------------------------------------------------------------------------

// float_to_e2m1 for 8 lanes (the ladder of formats.md section 3; NaN -> 0; a zero result is code 0).
inline __m256i float_to_e2m1x8(__m256 y) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
    const auto above = [&](float t) { return _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(t), _CMP_GT_OQ)); };
    const auto at_least = [&](float t) { return _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(t), _CMP_GE_OQ)); };
    // Every threshold passed adds one step up the ladder; a true comparison is -1.
    __m256i steps = _mm256_add_epi32(above(0.25f), at_least(0.75f));
    steps = _mm256_add_epi32(steps, _mm256_add_epi32(above(1.25f), at_least(1.75f)));
    steps = _mm256_add_epi32(steps, _mm256_add_epi32(above(2.5f), at_least(3.5f)));
    steps = _mm256_add_epi32(steps, above(5.0f));
    const __m256i magnitude = _mm256_sub_epi32(_mm256_setzero_si256(), steps);
    const __m256i negative = _mm256_srai_epi32(_mm256_castps_si256(y), 31);
    const __m256i nonzero = _mm256_cmpgt_epi32(magnitude, _mm256_setzero_si256());
    const __m256i sign = _mm256_and_si256(_mm256_and_si256(negative, nonzero), _mm256_set1_epi32(8));
    return _mm256_or_si256(magnitude, sign);
}

// e2m1_to_float for 8 codes (each < 16) in 32-bit lanes (bit 3 is the sign; code 8 gives -0).
inline __m256 e2m1x8_to_float(__m256i codes) {
    const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, codes);  // uses the low 3 bits
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28);
    return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
}

// The 16 E2M1 codes of one packed NVFP4 block (8 bytes), one per byte, in element order.
inline __m128i nvfp4_unpack16(const std::uint8_t* packed) {
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
    const __m128i low_nibbles = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
    const __m128i high_nibbles = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F));
    return _mm_unpacklo_epi8(low_nibbles, high_nibbles);
}

// 16 codes (one per byte, each < 16) -> 8 packed bytes in the low half: element 2i low nibble, 2i+1 high nibble.
inline __m128i nvfp4_pack16(__m128i codes) {
    const __m128i pairs = _mm_maddubs_epi16(codes, _mm_set1_epi16(0x1001));  // even * 1 + odd * 16
    return _mm_packus_epi16(pairs, pairs);
}

// ---- Packing and reductions --------------------------------------------------------------------------------------

// The low bytes of the 32-bit lanes of a (elements 0-7) and b (8-15), each lane in [0, 255].
inline __m128i pack_u32x16_to_u8(__m256i a, __m256i b) {
    const __m128i a16 = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    const __m128i b16 = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    return _mm_packus_epi16(a16, b16);
}

// |x| with NaN lanes replaced by 0 (a block's amax ignores NaNs).
inline __m256 abs_or_zero_if_nan(__m256 x) {
    return _mm256_and_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_cmp_ps(x, x, _CMP_ORD_Q));
}

// The largest lane of a vector without NaNs.
inline float horizontal_max(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

}  // namespace msa::avx2
