// AVX2/FMA GEMM machinery shared by the per-format files (include only from *_avx2.cpp files).
//
// A "loader" turns 8 consecutive weights W[n][k..k+7] into exact floats (k a multiple of 8). The tile computes,
// for MR activation rows and NR weight rows, 8-lane FMA accumulators over K in order. Small batches (decode,
// speculative verify) run the loader straight on the quantised weights (small_tile: row cursors, one scale per
// block, prefetch of the next rows); large batches first decode a panel of
// weights to floats (the same loader) and run the F32 loader over the panel, keeping the accumulators in memory
// between K blocks. Both routes perform the same FMAs in the same order, so results are bit-identical.
#pragma once

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace msa::cpu::avx2 {

// Besides load(n, k) (8 weights) and scalar(n, k), a loader offers the block interface of small_tile: kBlock weights
// per scale block, a Row cursor, block_scale(row, k) and chunk(row, scale, k, c) = load(n, k + 8c) exactly, and the
// address of weight (n, k) for prefetching every kPrefetchEvery columns (64 bytes).
struct NoScale {};

struct F32Loader {
    const float* w;
    std::size_t ld;
    static constexpr int kBlock = 8;
    static constexpr int kPrefetchEvery = 16;
    using Row = const float*;
    using Scale = NoScale;
    Row row(std::int64_t n) const { return w + n * ld; }
    Scale block_scale(Row, std::int64_t) const { return {}; }
    __m256 chunk(Row r, Scale, std::int64_t k, int c) const { return _mm256_loadu_ps(r + k + 8 * c); }
    const char* address(std::int64_t n, std::int64_t k) const { return reinterpret_cast<const char*>(w + n * ld + k); }
    __m256 load(std::int64_t n, std::int64_t k) const { return _mm256_loadu_ps(w + n * ld + k); }
    float scalar(std::int64_t n, std::int64_t k) const { return w[n * ld + k]; }
};

// acc[i * NR + j] += x[i][k0:k1] . W[n + j][k0:k1] in 8-lane steps (k1 - k0 a multiple of 8).
template <int MR, int NR, class Loader>
inline void tile_accumulate(const float* x, std::size_t ldx, const Loader& w, std::int64_t n, std::int64_t k0,
                            std::int64_t k1, __m256* acc) {
    __m256 a[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a[i][j] = acc[i * NR + j];
    for (std::int64_t k = k0; k < k1; k += 8) {
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = w.load(n + j, k);
        for (int i = 0; i < MR; ++i) {
            const __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
            for (int j = 0; j < NR; ++j) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i * NR + j] = a[i][j];
}

// Runs tile_accumulate for a tile of mr <= 4 rows and nr <= 4 columns chosen at run time.
template <class Loader>
inline void tile_dispatch(int mr, int nr, const float* x, std::size_t ldx, const Loader& w, std::int64_t n,
                          std::int64_t k0, std::int64_t k1, __m256* acc) {
#define MSA_TILE_CASE(R, C) \
    case (R) * 8 + (C): tile_accumulate<R, C>(x, ldx, w, n, k0, k1, acc); return;
    switch (mr * 8 + nr) {
        MSA_TILE_CASE(1, 1) MSA_TILE_CASE(1, 2) MSA_TILE_CASE(1, 3) MSA_TILE_CASE(1, 4)
        MSA_TILE_CASE(2, 1) MSA_TILE_CASE(2, 2) MSA_TILE_CASE(2, 3) MSA_TILE_CASE(2, 4)
        MSA_TILE_CASE(3, 1) MSA_TILE_CASE(3, 2) MSA_TILE_CASE(3, 3) MSA_TILE_CASE(3, 4)
        MSA_TILE_CASE(4, 1) MSA_TILE_CASE(4, 2) MSA_TILE_CASE(4, 3) MSA_TILE_CASE(4, 4)
        default: break;
    }
#undef MSA_TILE_CASE
}

// `t`, as an expression whose type depends on D. Inside a generic lambda, members named through it are looked up
// only when the lambda is instantiated with that D, so a discarded `if constexpr` branch may name members the loader
// lacks (clang checks a non-dependent expression there as soon as the enclosing template is instantiated).
template <class D, class T>
constexpr const T& depend_on(const T& t) {
    return t;
}

// Whether a loader asks small_tile to check each block (kCheckBlocks; tile_flagged(rows, k_end): may any block of
// the tile's rows be flagged; block_flagged(rows, k)) and decode flagged blocks with chunk_f16c instead of chunk
// (MXFP8: see gemm_mxfp8_avx2.cpp).
template <class Loader>
constexpr bool has_block_check() {
    if constexpr (requires { Loader::kCheckBlocks; }) {
        return Loader::kCheckBlocks;
    } else {
        return false;
    }
}

// The small-batch tile for loaders that decode whole blocks (kBlock weights sharing one scale; see the loaders):
// the same FMAs in the same order as tile_accumulate (8-lane chunks in K order), but the row pointers and each
// block's scale are computed once, and while a tile streams its NR weight rows it prefetches the same columns of
// the next NR rows (rows are short at decode sizes, too short for the hardware prefetcher to ramp up on each).
template <int MR, int NR, class Loader>
inline void small_tile(const float* x, std::size_t ldx, const Loader& w, std::int64_t n, std::int64_t k_vec,
                       bool prefetch, __m256* acc) {
    constexpr int kChunks = Loader::kBlock / 8;
    typename Loader::Row r[NR];
    for (int j = 0; j < NR; ++j) r[j] = w.row(n + j);
    __m256 a[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a[i][j] = _mm256_setzero_ps();
    const std::int64_t k_blocks = k_vec / Loader::kBlock * Loader::kBlock;
    std::int64_t k = 0;
    // The block loop, with the per-block check only where the tile may hold a flagged block (a separate loop
    // otherwise: no test per block, fewer live registers).
    auto blocks = [&](auto checked) __attribute__((always_inline)) {
#pragma GCC unroll 2
        for (; k < k_blocks; k += Loader::kBlock) {
            if (prefetch && k % Loader::kPrefetchEvery == 0) {
                for (int j = 0; j < NR; ++j) prefetch_weights(w.address(n + NR + j, k));
            }
            typename Loader::Scale sc[NR];
            for (int j = 0; j < NR; ++j) sc[j] = w.block_scale(r[j], k);
            // The block's products, its weights decoded by `decode` (chunk, or the loader's alternative decoding
            // for flagged blocks: identical values).
            auto block = [&](auto decode) __attribute__((always_inline)) {
                for (int c = 0; c < kChunks; ++c) {
                    __m256 wv[NR];
                    for (int j = 0; j < NR; ++j) wv[j] = decode(j, c);
                    for (int i = 0; i < MR; ++i) {
                        const __m256 xv = _mm256_loadu_ps(x + i * ldx + k + 8 * c);
                        for (int j = 0; j < NR; ++j) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
                    }
                }
            };
            if constexpr (decltype(checked)::value) {
                const auto& wc = depend_on<decltype(checked)>(w);
                if (wc.block_flagged(r, k)) [[unlikely]] {
                    block([&](int j, int c) { return wc.chunk_f16c(r[j], sc[j], k, c); });
                    continue;
                }
            }
            block([&](int j, int c) { return w.chunk(r[j], sc[j], k, c); });
        }
    };
    if constexpr (has_block_check<Loader>()) {
        if (w.tile_flagged(r, k_blocks)) {
            blocks(std::true_type{});
        } else {
            blocks(std::false_type{});
        }
    } else {
        blocks(std::false_type{});
    }
    for (; k < k_vec; k += 8) {  // 8-column remainder (F32-like loaders only), same order
        for (int j = 0; j < NR; ++j) {
            const __m256 wv = w.load(n + j, k);
            for (int i = 0; i < MR; ++i) a[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k), wv, a[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i * NR + j] = a[i][j];
}

template <class Loader>
inline void small_dispatch(int mr, int nr, const float* x, std::size_t ldx, const Loader& w, std::int64_t n,
                           std::int64_t k_vec, bool prefetch, __m256* acc) {
#define MSA_SMALL_CASE(R, C) \
    case (R) * 8 + (C): small_tile<R, C>(x, ldx, w, n, k_vec, prefetch, acc); return;
    switch (mr * 8 + nr) {
        MSA_SMALL_CASE(1, 1) MSA_SMALL_CASE(1, 2) MSA_SMALL_CASE(1, 3) MSA_SMALL_CASE(1, 4)
        MSA_SMALL_CASE(2, 1) MSA_SMALL_CASE(2, 2) MSA_SMALL_CASE(2, 3) MSA_SMALL_CASE(2, 4)
        MSA_SMALL_CASE(3, 1) MSA_SMALL_CASE(3, 2) MSA_SMALL_CASE(3, 3)
        MSA_SMALL_CASE(4, 1) MSA_SMALL_CASE(4, 2) MSA_SMALL_CASE(4, 3)
        default: break;
    }
#undef MSA_SMALL_CASE
}

// Columns per tile: wider when few rows share each weight load.
inline int tile_cols(int mr) { return mr <= 2 ? 4 : 3; }

// Finishes one output: fixed-order reduction, the scalar K tail (only F32-like loaders have one), a post-scale.
template <class Loader>
inline float finish(__m256 acc, const float* xrow, const Loader& w, std::int64_t n, std::int64_t k_vec,
                    std::int64_t k_end, float post) {
    float s = hsum(acc);
    for (std::int64_t k = k_vec; k < k_end; ++k) s += xrow[k] * w.scalar(n, k);
    return s * post;
}

// The whole GEMM over rows [n0, n1) for one loader. `post` multiplies every output (NVFP4's global scale).
template <class Loader>
void gemm_rows(const GemmJob& job, const Loader& loader, float post) {
    const std::int64_t K = job.w->cols;
    const std::int64_t k_vec = K / 8 * 8;
    const std::size_t ldx = static_cast<std::size_t>(K);
    constexpr std::int64_t kSmallBatch = 8;
    if (job.m <= kSmallBatch) {
        // Decode / verify: run the loader directly on the stored weights.
        for (std::int64_t i0 = 0; i0 < job.m; i0 += 4) {
            const int mr = static_cast<int>(std::min<std::int64_t>(4, job.m - i0));
            const int nr_max = tile_cols(mr);
            for (std::int64_t n = job.n0; n < job.n1; n += nr_max) {
                const int nr = static_cast<int>(std::min<std::int64_t>(nr_max, job.n1 - n));
                __m256 acc[16];
                const float* x = job.x + i0 * K;
                const bool prefetch = n + 2 * nr_max <= job.n1;
                small_dispatch(mr, nr, x, ldx, loader, n, k_vec, prefetch, acc);
                for (int i = 0; i < mr; ++i)
                    for (int j = 0; j < nr; ++j)
                        job.y[(i0 + i) * job.ldy + n + j] =
                            finish(acc[i * nr + j], x + i * K, loader, n + j, k_vec, K, post);
            }
        }
        return;
    }
    // Prefill: decode a panel of P weight rows x Kc columns once, sweep all activation rows over it. Accumulators
    // start at zero in registers on the first K block, go to memory between K blocks, and are finished straight
    // from registers on the last one.
    constexpr std::int64_t P = 12;
    constexpr std::int64_t Kc = 512;
    thread_local std::vector<float> panel;
    thread_local std::vector<float> accs;  // 8 lanes per (row, column), only when K spans several blocks
    panel.resize(static_cast<std::size_t>(P * Kc));
    if (k_vec > Kc) accs.resize(static_cast<std::size_t>(job.m * P * 8));
    for (std::int64_t np = job.n0; np < job.n1; np += P) {
        const std::int64_t pn = std::min(P, job.n1 - np);
        for (std::int64_t k0 = 0; k0 < std::max<std::int64_t>(k_vec, 1); k0 += Kc) {
            const std::int64_t k1 = std::min(k_vec, k0 + Kc);
            const bool first = k0 == 0, last = k1 >= k_vec;
            for (std::int64_t j = 0; j < pn; ++j)
                for (std::int64_t k = k0; k < k1; k += 8)
                    _mm256_storeu_ps(panel.data() + j * Kc + (k - k0), loader.load(np + j, k));
            const F32Loader pl{panel.data(), static_cast<std::size_t>(Kc)};
            for (std::int64_t i0 = 0; i0 < job.m; i0 += 4) {
                const int mr = static_cast<int>(std::min<std::int64_t>(4, job.m - i0));
                const int nr_max = tile_cols(mr);
                for (std::int64_t j0 = 0; j0 < pn; j0 += nr_max) {
                    const int nr = static_cast<int>(std::min<std::int64_t>(nr_max, pn - j0));
                    __m256 acc[16];
                    for (int i = 0; i < mr; ++i)
                        for (int j = 0; j < nr; ++j)
                            acc[i * nr + j] = first ? _mm256_setzero_ps()
                                                    : _mm256_loadu_ps(&accs[((i0 + i) * P + j0 + j) * 8]);
                    // The panel holds columns [k0, k1) at offset 0: shift x by k0 and index the panel from 0.
                    tile_dispatch(mr, nr, job.x + i0 * K + k0, ldx, pl, j0, 0, k1 - k0, acc);
                    for (int i = 0; i < mr; ++i)
                        for (int j = 0; j < nr; ++j) {
                            if (last) {
                                job.y[(i0 + i) * job.ldy + np + j0 + j] = finish(
                                    acc[i * nr + j], job.x + (i0 + i) * K, loader, np + j0 + j, k_vec, K, post);
                            } else {
                                _mm256_storeu_ps(&accs[((i0 + i) * P + j0 + j) * 8], acc[i * nr + j]);
                            }
                        }
                }
            }
        }
    }
}

}  // namespace msa::cpu::avx2
