// Pieces shared by the AVX2 and AVX-512 small-batch kernels that hold no vector code: the weight prefetch, the walk
// over activation rows in tiles of at most 4 (each tile size a compile-time constant, so the kernels keep their
// accumulators in registers), and the row addresses of an NVFP4 weight tile. Internal linkage, like the other headers that files
// compiled for different instruction sets include (vec_math_avx2.h).
#pragma once

#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace msa::cpu {
namespace {

// Where the small-batch kernels prefetch the next tile's weights: the L2 (T1), not the L1 (T0). The weights are
// read once and need not pass through the L1 ahead of use. On a 2-CPU EPYC (Zen 4) VM, streamed GEMVs of the mid
// model's shapes, medians of 5 interleaved runs at 1 / 2 threads: BF16 lm_head 13.6 -> 22.2 / 24.6 -> 30.5 GB/s,
// MXFP8 3072 x 1024 10.7 -> 12.8 / 20.8 -> 22.0, ten W4A4 experts 8.8 -> 12.5 / 16.9 -> 23.1
// (bench/gemv_ab_bench.sh; bench/results/gemv_2026-12-02_zen4_s17_prefetch_ab.json).
inline void prefetch_weights(const void* p) {
    __builtin_prefetch(p, 0, 2);  // a read, locality 2: what _MM_HINT_T1 asks for
}

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
