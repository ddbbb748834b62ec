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

namespace msa::cpu::avx512 {

// Two 256-bit values as the halves of one 512-bit value (the AVX-512 kernels hold two rows per register).
inline __m512 halves(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
inline __m512i halves(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

}  // namespace msa::cpu::avx512
