// Pieces shared by the AVX2 and AVX-512 small-batch kernels that hold no vector code: the walk over activation rows
// in tiles of at most 4 (each tile size a compile-time constant, so the kernels keep their accumulators in
// registers), and the row addresses of an NVFP4 weight tile. Internal linkage, like the other headers that files
// compiled for different instruction sets include (vec_math_avx2.h).
#pragma once

#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace msa::cpu {
namespace {

// fn(std::integral_constant<int, MR>{}, i0) for i0 = 0, 4, 8, ... < m, with MR = min(4, m - i0).
template <class Fn>
inline void for_row_tiles(std::int64_t m, Fn&& fn) {
    for (std::int64_t i0 = 0; i0 < m; i0 += 4) {
        switch (std::min<std::int64_t>(4, m - i0)) {
            case 1: fn(std::integral_constant<int, 1>{}, i0); break;
            case 2: fn(std::integral_constant<int, 2>{}, i0); break;
            case 3: fn(std::integral_constant<int, 3>{}, i0); break;
            default: fn(std::integral_constant<int, 4>{}, i0); break;
        }
    }
}

// The codes and block scales of NVFP4 weight rows n .. n + NR - 1 (K / 2 code bytes and K / 16 scales per row),
// and the first row after them (the next tile's, contiguous after these).
template <int NR>
struct Nvfp4TileRows {
    const std::uint8_t* codes[NR];
    const std::uint8_t* scales[NR];
    const std::uint8_t* next;
    Nvfp4TileRows(const WeightView& w, std::int64_t n) {
        const std::int64_t K = w.cols;
        const auto* base = static_cast<const std::uint8_t*>(w.data);
        for (int r = 0; r < NR; ++r) {
            codes[r] = base + (n + r) * (K / 2);
            scales[r] = w.scales + (n + r) * (K / 16);
        }
        next = base + (n + NR) * (K / 2);
    }
};

}  // namespace
}  // namespace msa::cpu
