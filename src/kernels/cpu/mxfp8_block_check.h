// Which 32-weight blocks of MXFP8 rows hold a code with exponent field 0 (an E4M3 subnormal, or a zero), for the
// small-batch loaders of gemm_mxfp8_avx2.cpp and gemm_mxfp8_avx512.cpp, which decode such blocks by F16C (see the
// top of gemm_mxfp8_avx2.cpp). From the adopted weight's bitmap: one bit per row and block; from the codes: the
// byte-wise minimum of (code & 0x78) over the rows has a zero byte. A row is anything with its codes `w` and its words
// of the bitmap `f`. Include only from those two files (AVX2 intrinsics; internal linkage, as they are compiled for
// different instruction sets).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace msa::cpu {
namespace {

enum class Mxfp8BlockCheck { none, bitmap, codes };

// Whether any block up to column k_end of the rows may be flagged (the codes check cannot tell without looking).
template <Mxfp8BlockCheck kCheck, class Row, int NR>
bool mxfp8_tile_flagged(const Row (&r)[NR], std::int64_t k_end) {
    if constexpr (kCheck == Mxfp8BlockCheck::bitmap) {
        std::uint64_t any = 0;
        for (int j = 0; j < NR; ++j)
            for (std::int64_t word = 0; word < (k_end / 32 + 63) / 64; ++word) any |= r[j].f[word];
        return any != 0;
    } else {
        return true;
    }
}

// Whether the block at column k of any of the rows is flagged.
template <Mxfp8BlockCheck kCheck, class Row, int NR>
bool mxfp8_block_flagged(const Row (&r)[NR], std::int64_t k) {
    const std::int64_t b = k / 32;
    if constexpr (kCheck == Mxfp8BlockCheck::bitmap) {
        std::uint64_t any = 0;
        for (int j = 0; j < NR; ++j) any |= r[j].f[b / 64];
        return (any >> (b % 64)) & 1;
    } else {
        __m256i e = _mm256_set1_epi8(0x78);
        for (int j = 0; j < NR; ++j) {
            const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r[j].w + k));
            e = _mm256_min_epu8(e, _mm256_and_si256(codes, _mm256_set1_epi8(0x78)));
        }
        return _mm256_movemask_epi8(_mm256_cmpeq_epi8(e, _mm256_setzero_si256())) != 0;
    }
}

// What a loader of the small-batch routes provides for the block check (a base of the MXFP8 loaders): kCheckBlocks,
// tile_flagged(rows, k_end) and block_flagged(rows, k).
template <Mxfp8BlockCheck kCheck>
struct Mxfp8BlockFlags {
    static constexpr bool kCheckBlocks = kCheck != Mxfp8BlockCheck::none;
    template <class Row, int NR>
    static bool tile_flagged(const Row (&r)[NR], std::int64_t k_end) {
        return mxfp8_tile_flagged<kCheck>(r, k_end);
    }
    template <class Row, int NR>
    static bool block_flagged(const Row (&r)[NR], std::int64_t k) {
        return mxfp8_block_flagged<kCheck>(r, k);
    }
};

}  // namespace
}  // namespace msa::cpu
