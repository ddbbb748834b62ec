// AVX-512 small-batch GEMM (decode and speculative verify: at most 8 activation rows) with the AVX2 kernels' results
// bit for bit (include only from *_avx512.cpp files).
//
// The AVX2 small tile (gemm_avx2.h small_tile) gives each (activation row, weight row) output one 8-lane FMA chain
// over K in 8-column chunks, then a fixed horizontal sum. Here a zmm register holds two weight rows, one per 256-bit
// half: a pair loader decodes chunk c of both rows into one register, each half exactly as the AVX2 loader decodes
// its row, and the activation chunk is broadcast to both halves. So each half performs its output's AVX2 chain, and
// one instruction serves two outputs. The caller runs the AVX2 kernel for a last odd weight row (the same results).
#pragma once

#include "kernels/cpu/avx512_prelude.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace msa::cpu::avx512 {

// `t`, as an expression whose type depends on D (see gemm_avx2.h: lets a discarded `if constexpr` branch of a
// generic lambda name members the loader lacks, under clang too).
template <class D, class T>
constexpr const T& depend_on(const T& t) {
    return t;
}

// Whether a pair loader checks blocks (kCheckBlocks: tile_flagged(rows), block_flagged(rows, k), and chunk_exact for
// flagged blocks), as the AVX2 MXFP8 loader does.
template <class Loader>
constexpr bool checks_blocks() {
    if constexpr (requires { Loader::kCheckBlocks; }) {
        return Loader::kCheckBlocks;
    } else {
        return false;
    }
}

// MR activation rows (x, row stride ldx) against weight rows n .. n + 2 NP - 1; K a multiple of Loader::kBlock.
// y[i * ldy + n + j] = the AVX2 small tile's result times post.
template <int MR, int NP, class Loader>
inline void pair_tile(const float* x, std::size_t ldx, const Loader& w, std::int64_t n, std::int64_t K, bool prefetch,
                      float post, float* y, std::int64_t ldy) {
    constexpr int NR = 2 * NP;
    constexpr int kChunks = Loader::kBlock / 8;
    typename Loader::Row r[NR];
    for (int j = 0; j < NR; ++j) r[j] = w.row(n + j);
    __m512 a[MR][NP];
    for (int i = 0; i < MR; ++i)
        for (int p = 0; p < NP; ++p) a[i][p] = _mm512_setzero_ps();
    std::int64_t k = 0;
    auto blocks = [&](auto checked) __attribute__((always_inline)) {
#pragma GCC unroll 2
        for (; k < K; k += Loader::kBlock) {
            if (prefetch && k % Loader::kPrefetchEvery == 0) {
                for (int j = 0; j < NR; ++j) prefetch_weights(w.address(n + NR + j, k));
            }
            typename Loader::Scale sc[NP];
            for (int p = 0; p < NP; ++p) sc[p] = w.block_scale(r[2 * p], r[2 * p + 1], k);
            auto block = [&](auto decode) __attribute__((always_inline)) {
                for (int c = 0; c < kChunks; ++c) {
                    __m512 wv[NP];
                    for (int p = 0; p < NP; ++p) wv[p] = decode(p, c);
                    for (int i = 0; i < MR; ++i) {
                        const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + i * ldx + k + 8 * c));
                        for (int p = 0; p < NP; ++p) a[i][p] = _mm512_fmadd_ps(xv, wv[p], a[i][p]);
                    }
                }
            };
            if constexpr (decltype(checked)::value) {
                const auto& wc = depend_on<decltype(checked)>(w);
                if (wc.block_flagged(r, k)) [[unlikely]] {
                    block([&](int p, int c) { return wc.chunk_exact(r[2 * p], r[2 * p + 1], sc[p], k, c); });
                    continue;
                }
            }
            block([&](int p, int c) { return w.chunk(r[2 * p], r[2 * p + 1], sc[p], k, c); });
        }
    };
    if constexpr (checks_blocks<Loader>()) {
        if (w.tile_flagged(r, K)) {
            blocks(std::true_type{});
        } else {
            blocks(std::false_type{});
        }
    } else {
        blocks(std::false_type{});
    }
    for (int i = 0; i < MR; ++i) {
        for (int p = 0; p < NP; ++p) {
            y[i * ldy + n + 2 * p] = avx2::hsum(_mm512_castps512_ps256(a[i][p])) * post;
            y[i * ldy + n + 2 * p + 1] = avx2::hsum(_mm512_extractf32x8_ps(a[i][p], 1)) * post;
        }
    }
}

// Row pairs per tile: Loader::kPairsForOneRow with one activation row (as measured best per format), else 2.
template <int MR, class Loader>
inline void pair_rows(const GemmJob& job, const Loader& w, std::int64_t i0, std::int64_t n1, float post) {
    constexpr int NP = MR == 1 ? Loader::kPairsForOneRow : 2;
    const std::int64_t K = job.w->cols;
    const float* x = job.x + i0 * K;
    float* y = job.y + i0 * job.ldy;
    std::int64_t n = job.n0;
    for (; n + 2 * NP <= n1; n += 2 * NP)
        pair_tile<MR, NP>(x, static_cast<std::size_t>(K), w, n, K, n + 4 * NP <= n1, post, y, job.ldy);
    for (; n + 2 <= n1; n += 2) pair_tile<MR, 1>(x, static_cast<std::size_t>(K), w, n, K, false, post, y, job.ldy);
}

// The small-batch GEMM over the pairs of rows [job.n0, n1) (n1 - job.n0 even); job.m <= 8, K a multiple of
// Loader::kBlock.
template <class Loader>
void pair_gemm(const GemmJob& job, std::int64_t n1, const Loader& w, float post) {
    for_row_tiles(job.m, [&](auto mr, std::int64_t i0) { pair_rows<mr>(job, w, i0, n1, post); });
}

// Runs `pairs` on the row pairs of the job and `avx2` on a last odd row.
template <class Pairs, class Avx2>
void in_pairs(const GemmJob& job, Pairs&& pairs, Avx2&& avx2) {
    const std::int64_t n1 = job.n0 + (job.n1 - job.n0) / 2 * 2;
    if (n1 > job.n0) pairs(n1);
    if (n1 < job.n1) {
        GemmJob last = job;
        last.n0 = n1;
        avx2(last);
    }
}

}  // namespace msa::cpu::avx512
