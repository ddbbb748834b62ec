// The first include of every *_avx512.cpp file, in a block of its own, and the helper they all use. GCC 12's AVX-512
// intrinsics start from _mm512_undefined_*(), which its -Wuninitialized flags once they are inlined into a kernel (a
// known false positive); the pragmas must come before the intrinsics header to cover it, and hold to the end of the
// file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

namespace msa::cpu::avx512 {

// Two 256-bit values as the halves of one 512-bit value (the AVX-512 kernels hold two rows per register).
inline __m512 halves(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
inline __m512i halves(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Eight E4M3 codes of each of two rows -> floats times 2^-8, row a in the low half: avx2::e4m3x8_times_2e_8 of each
// row (sign-extend, shift left by 7, clear bit 14: the FP16 number of the value times 2^-8), as one 16-lane
// conversion.
inline __m512 e4m3x8_pair_times_2e_8(const std::uint8_t* a, const std::uint8_t* b) {
    const __m128i codes = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                             _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0xBF80))));
}

}  // namespace msa::cpu::avx512
