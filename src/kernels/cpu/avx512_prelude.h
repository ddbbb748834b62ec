// The first include of every *_avx512.cpp file, in a block of its own. GCC 12's AVX-512 intrinsics start from
// _mm512_undefined_*(), which its -Wuninitialized flags once they are inlined into a kernel (a known false
// positive); the pragmas must come before the intrinsics header to cover it, and hold to the end of the file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>
