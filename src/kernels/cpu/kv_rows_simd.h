// NVFP4 KV rows for the SIMD kernels (include only from kv_rows_avx2.cpp and kv_rows_avx512.cpp): a page's row
// addresses, and the nibbles of stored codes as doubled E2M1 integers (SSE/AVX2 byte shuffles). Internal linkage:
// the two files are compiled for different instruction sets and must not share an out-of-line copy.
#pragma once

#include "kernels/cpu/fp_tables.h"
#include "kernels/kv_layout.h"

#include <immintrin.h>

#include <cstdint>

namespace msa::cpu {
namespace {

// The NVFP4 rows of one page with their addresses worked out once: row t's codes are data + t * dim / 2, its scales
// scales + t * dim / 16 (kv_layout.h).
struct PageRows {
    const std::uint8_t* data;
    const std::uint8_t* scales;
    int dim;
    const std::uint8_t* codes(int t) const { return data + static_cast<std::ptrdiff_t>(t) * (dim / 2); }
    const std::uint8_t* block_scales(int t) const { return scales + static_cast<std::ptrdiff_t>(t) * (dim / 16); }
};

inline PageRows page_rows(const PagedRows& rows, std::int32_t page) {
    return {rows.row_data(page, 0), rows.row_scales(page, 0), rows.dim};
}

// Code bytes -> the doubled E2M1 integers of their low nibbles (even values) and high nibbles (odd values).
struct NibbleInts {
    __m128i even, odd;
};

inline NibbleInts doubled_e2m1_nibbles(__m128i bytes) {
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1Doubled));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    return {_mm_shuffle_epi8(table, _mm_and_si128(bytes, low4)),
            _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), low4))};
}

// Two blocks' codes (16 bytes = 32 values in element order: the low nibble of byte i is value 2i) -> the doubled
// E2M1 integers as int8, values 0-15 in `lo`, 16-31 in `hi`.
struct Ints32 {
    __m128i lo, hi;
};

inline Ints32 doubled_e2m1_x32(const std::uint8_t* codes) {
    const NibbleInts n = doubled_e2m1_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    return {_mm_unpacklo_epi8(n.even, n.odd), _mm_unpackhi_epi8(n.even, n.odd)};
}

// One block's codes (8 bytes) -> its 16 doubled integers (rows whose dim is an odd number of blocks).
inline __m128i doubled_e2m1_x16(const std::uint8_t* codes) {
    const NibbleInts n = doubled_e2m1_nibbles(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return _mm_unpacklo_epi8(n.even, n.odd);
}

}  // namespace
}  // namespace msa::cpu
