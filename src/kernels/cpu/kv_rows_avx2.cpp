// AVX2 decoding of NVFP4 KV rows: 16 bytes -> 32 values per step (the nibbles through a pshufb table of the doubled
// E2M1 integers, interleaved back into element order, then each 16-value block converted and multiplied by half its
// scale: e2m1 * scale exactly).
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/kv_rows_simd.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <algorithm>

namespace msa::cpu {
namespace {

// One block's 16 integers -> its values v0 (0-7), v1 (8-15): integer * half the scale, exact (at most 4 + 3
// significant bits), rounded once to E4M3 in that read mode.
template <KvRead kMode>
inline void block_values(__m128i ints, const float* half_scale, __m256& v0, __m256& v1) {
    const __m256 hs = _mm256_broadcast_ss(half_scale);
    v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ints)), hs);
    v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ints, 8))), hs);
    if constexpr (kMode == KvRead::e4m3) {
        v0 = avx2::round_to_e4m3(v0);
        v1 = avx2::round_to_e4m3(v1);
    }
}

// Rows of 128 values (the models' head and index dimension) take versions of the row reader and of the fused product
// with this block count fixed at compile time: the block loop unrolls and the accumulators stay in registers.
constexpr int kFixedRowBlocks = 8;
inline bool fixed_row_length(const PageRows& p) { return p.dim == kFixedRowBlocks * 16; }

// kBlocks > 0: the row length fixed at compile time (kFixedRowBlocks).
template <KvRead kMode, int kBlocks = 0>
void read_rows(const PageRows& p, int count, float* out) {
    const float* half = e4m3_half_table();
    const int blocks = kBlocks > 0 ? kBlocks : p.dim / 16;
    for (int t = 0; t < count; ++t) {
        const std::uint8_t* d = p.codes(t);
        const std::uint8_t* s = p.block_scales(t);
        float* o = out + static_cast<std::ptrdiff_t>(t) * p.dim;
        int g = 0;
        for (; g + 2 <= blocks; g += 2) {
            const Ints32 ints = doubled_e2m1_x32(d + g * 8);
            __m256 v0, v1, v2, v3;
            block_values<kMode>(ints.lo, half + s[g], v0, v1);
            block_values<kMode>(ints.hi, half + s[g + 1], v2, v3);
            _mm256_storeu_ps(o + g * 16, v0);
            _mm256_storeu_ps(o + g * 16 + 8, v1);
            _mm256_storeu_ps(o + g * 16 + 16, v2);
            _mm256_storeu_ps(o + g * 16 + 24, v3);
        }
        if (g < blocks) {
            __m256 v0, v1;
            block_values<kMode>(doubled_e2m1_x16(d + g * 8), half + s[g], v0, v1);
            _mm256_storeu_ps(o + g * 16, v0);
            _mm256_storeu_ps(o + g * 16 + 8, v1);
        }
    }
}

}  // namespace

void read_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out) {
    const PageRows p = page_rows(rows, page);
    if (mode == KvRead::e4m3) {
        (fixed_row_length(p) ? read_rows<KvRead::e4m3, kFixedRowBlocks> : read_rows<KvRead::e4m3>)(p, count, out);
    } else {
        (fixed_row_length(p) ? read_rows<KvRead::exact, kFixedRowBlocks> : read_rows<KvRead::exact>)(p, count, out);
    }
}

// The fused decode-side product (kv_rows.h dot_kv_rows): each stored row's blocks are decoded exactly as above, in
// registers, and every query row's 8-lane accumulator takes them in K order with FMA (values 0-7 of a block, then
// 8-15), then the same fixed horizontal sum as gemm_nt_f32: identical sums, without writing and re-reading the
// decoded floats.
namespace {

// The products of one block (values v0, v1 of T stored rows) with R query rows at column `col`.
template <int R, int T>
inline void block_fma(const float* a, int dim, int col, const __m256 (&v0)[T], const __m256 (&v1)[T],
                      __m256 (&acc)[T][R]) {
    for (int i = 0; i < R; ++i) {
        const __m256 a0 = _mm256_loadu_ps(a + i * dim + col);
        const __m256 a1 = _mm256_loadu_ps(a + i * dim + col + 8);
        for (int u = 0; u < T; ++u) {
            acc[u][i] = _mm256_fmadd_ps(a0, v0[u], acc[u][i]);
            acc[u][i] = _mm256_fmadd_ps(a1, v1[u], acc[u][i]);
        }
    }
}

// R query rows against stored rows [t0, t0 + T): one accumulator per (stored row, query row), so that few query rows
// (decode's index heads, or one head per task) still give the core several independent FMA chains; each chain is the
// one a single row would form.
// kBlocks > 0: the row length fixed at compile time (kFixedRowBlocks).
template <KvRead kMode, int R, int T, int kBlocks = 0>
inline void dot_rows_step(const PageRows& p, int t0, const float* a, float* out, std::int64_t ldo) {
    const int blocks = kBlocks > 0 ? kBlocks : p.dim / 16;
    const int dim = blocks * 16;
    const float* half = e4m3_half_table();
    const std::uint8_t* d[T];
    const std::uint8_t* s[T];
    for (int u = 0; u < T; ++u) {
        d[u] = p.codes(t0 + u);
        s[u] = p.block_scales(t0 + u);
    }
    __m256 acc[T][R];
    for (int u = 0; u < T; ++u)
        for (int i = 0; i < R; ++i) acc[u][i] = _mm256_setzero_ps();
    int g = 0;
    for (; g + 2 <= blocks; g += 2) {
        Ints32 ints[T];
        for (int u = 0; u < T; ++u) ints[u] = doubled_e2m1_x32(d[u] + g * 8);
        __m256 v0[T], v1[T];
        for (int u = 0; u < T; ++u) block_values<kMode>(ints[u].lo, half + s[u][g], v0[u], v1[u]);
        block_fma<R, T>(a, dim, g * 16, v0, v1, acc);
        for (int u = 0; u < T; ++u) block_values<kMode>(ints[u].hi, half + s[u][g + 1], v0[u], v1[u]);
        block_fma<R, T>(a, dim, g * 16 + 16, v0, v1, acc);
    }
    if (g < blocks) {
        __m256 v0[T], v1[T];
        for (int u = 0; u < T; ++u) block_values<kMode>(doubled_e2m1_x16(d[u] + g * 8), half + s[u][g], v0[u], v1[u]);
        block_fma<R, T>(a, dim, g * 16, v0, v1, acc);
    }
    for (int u = 0; u < T; ++u)
        for (int i = 0; i < R; ++i) out[i * ldo + t0 + u] = avx2::hsum(acc[u][i]);
}

// Stored rows per pass for R query rows: R * T independent chains.
template <int R>
constexpr int rows_per_pass() {
    return R == 1 ? 4 : 2;
}

template <KvRead kMode, int R>
void dot_rows_fixed(const PageRows& p, int count, const float* a, float* out, std::int64_t ldo) {
    constexpr int T = rows_per_pass<R>();
    int t = 0;
    if (fixed_row_length(p)) {
        for (; t + T <= count; t += T) dot_rows_step<kMode, R, T, kFixedRowBlocks>(p, t, a, out, ldo);
    } else {
        for (; t + T <= count; t += T) dot_rows_step<kMode, R, T>(p, t, a, out, ldo);
    }
    for (; t < count; ++t) dot_rows_step<kMode, R, 1>(p, t, a, out, ldo);
}

template <KvRead kMode>
void dot_rows(const PageRows& p, int count, const float* a, std::int64_t arows, float* out, std::int64_t ldo) {
    for_row_tiles(arows, [&](auto mr, std::int64_t i0) {
        dot_rows_fixed<kMode, mr>(p, count, a + i0 * p.dim, out + i0 * ldo, ldo);
    });
}

}  // namespace

void dot_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a,
                            std::int64_t arows, float* out, std::int64_t ldo) {
    const PageRows p = page_rows(rows, page);
    if (mode == KvRead::e4m3) {
        dot_rows<KvRead::e4m3>(p, count, a, arows, out, ldo);
    } else {
        dot_rows<KvRead::exact>(p, count, a, arows, out, ldo);
    }
}

}  // namespace msa::cpu
