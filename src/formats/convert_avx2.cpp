// AVX2/F16C bulk conversions (compiled with AVX2 flags; called only when cpu_features().avx2). Full vectors go
// through the helpers of simd_avx2.h, the tail through the scalar reference functions.
#include <immintrin.h>

#include "formats/bulk_avx2.h"
#include "formats/scalar_formats.h"
#include "formats/simd_avx2.h"

namespace msa::avx2 {
namespace {

// out[i] = scalar(in[i]) for i < n: `Width` elements at a time through vector(in + i, out + i), the tail through
// `scalar`.
template <std::size_t Width, typename In, typename Out, typename Vector, typename Scalar>
void convert(const In* in, Out* out, std::size_t n, Vector vector, Scalar scalar) {
    std::size_t i = 0;
    for (; i + Width <= n; i += Width) vector(in + i, out + i);
    for (; i < n; ++i) out[i] = scalar(in[i]);
}

__m128i load128(const void* p) {
    return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
void store128(void* p, __m128i v) {
    _mm_storeu_si128(static_cast<__m128i*>(p), v);
}

// 16 floats -> 16 one-byte codes through an 8-lane encoder.
template <typename Encode8>
void encode16(const float* in, std::uint8_t* out, Encode8 encode) {
    store128(out, pack_u32x16_to_u8(encode(_mm256_loadu_ps(in)), encode(_mm256_loadu_ps(in + 8))));
}

// 16 one-byte codes -> 16 floats through a 16-lane decoder.
template <typename Decode16>
void decode16(const std::uint8_t* in, float* out, Decode16 decode) {
    __m256 lo, hi;
    decode(load128(in), lo, hi);
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
}

}  // namespace

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    convert<8>(
        in, out, n, [](const std::uint16_t* i, float* o) { _mm256_storeu_ps(o, bf16x8_to_float(load128(i))); },
        [](std::uint16_t b) { return msa::bf16_to_float(b); });
}

void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
    convert<8>(
        in, out, n, [](const float* i, std::uint16_t* o) { store128(o, float_to_bf16x8(_mm256_loadu_ps(i))); },
        [](float x) { return msa::float_to_bf16(x); });
}

void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    convert<8>(
        in, out, n, [](const std::uint16_t* i, float* o) { _mm256_storeu_ps(o, _mm256_cvtph_ps(load128(i))); },
        [](std::uint16_t h) { return msa::fp16_to_float(h); });
}

void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n) {
    convert<8>(
        in, out, n,
        [](const float* i, std::uint16_t* o) {
            store128(o, _mm256_cvtps_ph(_mm256_loadu_ps(i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        },
        [](float x) { return msa::float_to_fp16(x, Overflow::ieee); });
}

void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    convert<16>(
        in, out, n, [](const std::uint8_t* i, float* o) { decode16(i, o, e4m3x16_to_float); },
        [](std::uint8_t c) { return msa::e4m3_to_float(c); });
}

void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    convert<16>(
        in, out, n, [](const std::uint8_t* i, float* o) { decode16(i, o, e5m2x16_to_float); },
        [](std::uint8_t c) { return msa::e5m2_to_float(c); });
}

void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n) {
    convert<16>(
        in, out, n, [](const float* i, std::uint8_t* o) { encode16(i, o, float_to_e4m3x8_saturate); },
        [](float x) { return msa::float_to_e4m3(x, Overflow::saturate); });
}

void float_to_e5m2(const float* in, std::uint8_t* out, std::size_t n) {
    convert<16>(
        in, out, n, [](const float* i, std::uint8_t* o) { encode16(i, o, float_to_e5m2x8_saturate); },
        [](float x) { return msa::float_to_e5m2(x, Overflow::saturate); });
}

void bf16_to_e4m3(const std::uint16_t* in, std::uint8_t* out, std::size_t n) {
    convert<16>(
        in, out, n,
        [](const std::uint16_t* i, std::uint8_t* o) {
            const __m256 lo = bf16x8_to_float(load128(i));
            const __m256 hi = bf16x8_to_float(load128(i + 8));
            store128(o, pack_u32x16_to_u8(float_to_e4m3x8_saturate(lo), float_to_e4m3x8_saturate(hi)));
        },
        [](std::uint16_t b) { return msa::float_to_e4m3(msa::bf16_to_float(b), Overflow::saturate); });
}

}  // namespace msa::avx2
