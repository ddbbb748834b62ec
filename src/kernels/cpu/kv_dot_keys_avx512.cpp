// The fused NVFP4 key product (dot_kv_rows) on AVX-512 for rows of 128 values, keys in lanes, with the results of the
// AVX2 kernel (kv_rows_avx2.cpp) bit for bit. There, the sum of query row i and stored row t is an 8-lane accumulator
// whose lane l takes a[8k + l] * v[8k + l] by FMA for k = 0 .. 15 in order, and avx2::hsum adds the lanes as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Here every such chain is one lane of a register acc[l] that
// holds 16 stored rows, one per lane, and takes the same FMAs in the same order; the lanes' sum becomes the same adds
// between registers, and the 16 results are stored at once. Stored row t's 4-byte word k holds exactly the 8 codes of
// step k (values 8k .. 8k + 7, nibble l = value 8k + l), so a 16 x 16 transposition of words gives, per step, every
// row's codes in one register. A code becomes its doubled E2M1 value by vpermps (which reads the low 4 bits of each
// index) and is multiplied by half its block's scale (exact, as in the AVX2 kernel): a shift, a vpermps and a multiply
// per 16 values, where the two-rows-per-register kernel (kv_rows_avx512.cpp) unpacks, widens and converts. The 16 rows
// are decoded once for all query rows of the call; each decoded register serves up to 4 query rows. A last partial
// tile repeats its last row in the unused lanes, which are not stored. On a 2-CPU Zen 4 VM, 1 thread, 4 interleaved
// runs (`msa_cpu_bench` kv_dot_nvfp4_d128_r*, docs/performance.md session 19): 4 query rows 16.0-19.8 -> 9.6-10.1 ns
// per key, 2 rows 11.8-15.5 -> 7.2-7.6, 1 row 10.2-11.0 -> 6.3-6.8.

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/kv_rows_simd.h"
#include "kernels/cpu/row_tiles.h"

#include <algorithm>
#include <cstring>

namespace msa::cpu {
namespace {

constexpr int kKeys = 16;             // stored rows per register
constexpr int kDim = 128;             // values per row
constexpr int kSteps = kDim / 8;      // 8-value steps (4-byte code words) per row
constexpr int kBlocks = kDim / 16;    // scale blocks per row
constexpr int kScaleBytes = kBlocks;  // scale bytes per row

// 16 stored rows, keys in lanes: codes[k] = code word k of each row, half_scale[g] = half the scale of block g.
struct KeyTile {
    __m512i codes[kSteps];
    __m512 half_scale[kBlocks];
};

// r[t] = word row t (16 words) -> r[k] = word k of every row t, in lane t.
inline void transpose_words(__m512i (&r)[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // r[4b + c], 128-bit lane q: word 4q + c of rows 4b .. 4b + 3.
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    // A 4 x 4 transposition of 128-bit lanes among r[c], r[4 + c], r[8 + c], r[12 + c].
    for (int c = 0; c < 4; ++c) {
        const __m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44);
        const __m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
        const __m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
        const __m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
        t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
        t[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
        t[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// codes: 16 rows of kDim / 2 bytes, `code_stride` apart; scales: 16 rows of kScaleBytes bytes, contiguous.
inline void load_tile(const std::uint8_t* codes, std::ptrdiff_t code_stride, const std::uint8_t* scales, KeyTile& kt) {
    __m512i r[16];
    for (int t = 0; t < kKeys; ++t) r[t] = _mm512_loadu_si512(codes + t * code_stride);
    transpose_words(r);
    for (int k = 0; k < kSteps; ++k) kt.codes[k] = r[k];
    // Lane t of w0 / w1: scale bytes 0-3 / 4-7 of row t.
    const __m512i s0 = _mm512_loadu_si512(scales), s1 = _mm512_loadu_si512(scales + 64);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i w[2] = {_mm512_permutex2var_epi32(s0, even, s1),
                          _mm512_permutex2var_epi32(s0, _mm512_add_epi32(even, _mm512_set1_epi32(1)), s1)};
    // Half the E4M3 value from its bits: the magnitude bits placed at bit 20 of a float (exponent field = the
    // E4M3 exponent, top mantissa bits = its mantissa) are the value times 2^-120, a float subnormal for the E4M3
    // subnormals (exact: MXCSR's DAZ is never set), so a multiply by 2^119 is exact; the sign is or-ed in. The
    // NaN codes (0x7F, 0xFF) take the table's value.
    const __m512i mag_mask = _mm512_set1_epi32(0x07F00000),
                  sign_mask = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    const __m512 two_119 = _mm512_castsi512_ps(_mm512_set1_epi32(0x7B000000));
    for (int g = 0; g < kBlocks; ++g) {
        const __m512i x = w[g / 4];
        const int p = 8 * (g % 4);  // the code's lowest bit in x
        const __m512i mag =
            _mm512_and_si512(p <= 20 ? _mm512_slli_epi32(x, 20 - p) : _mm512_srli_epi32(x, p - 20), mag_mask);
        const __m512i sign = _mm512_and_si512(_mm512_slli_epi32(x, 24 - p), sign_mask);
        __m512 hs = _mm512_or_ps(_mm512_mul_ps(_mm512_castsi512_ps(mag), two_119), _mm512_castsi512_ps(sign));
        const __mmask16 nan = _mm512_cmpeq_epi32_mask(mag, mag_mask);
        if (nan != 0) {
            const __m512i code = _mm512_and_si512(_mm512_srli_epi32(x, p), _mm512_set1_epi32(0xFF));
            hs = _mm512_mask_i32gather_ps(hs, nan, code, e4m3_half_table(), 4);
        }
        kt.half_scale[g] = hs;
    }
}

// The chains of lanes L[0..LW) for R query rows, reduced as hsum does: LW = 8 gives the whole sum; LW = 4 with
// lanes {0, 4, 2, 6} gives (s0 + s2), with lanes {1, 5, 3, 7} (s1 + s3), where s_j = l_j + l_{j + 4}.
template <int R, int LW>
inline void lane_sums(const KeyTile& kt, const float* a, const int (&lanes)[LW], __m512 (&out)[R]) {
    const __m512 doubled = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    __m512 acc[R][LW];
    for (int i = 0; i < R; ++i)
        for (int u = 0; u < LW; ++u) acc[i][u] = _mm512_setzero_ps();
    for (int k = 0; k < kSteps; ++k) {
        for (int u = 0; u < LW; ++u) {
            const int l = lanes[u];
            const __m512i idx = l == 0 ? kt.codes[k] : _mm512_srli_epi32(kt.codes[k], 4 * l);
            const __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(idx, doubled), kt.half_scale[k / 2]);
            for (int i = 0; i < R; ++i)
                acc[i][u] = _mm512_fmadd_ps(_mm512_set1_ps(a[i * kDim + 8 * k + l]), v, acc[i][u]);
        }
    }
    // Lane positions in `lanes`: l and l + 4 are neighbours (u, u + 1), pairs (0, 4) and (2, 6) first.
    for (int i = 0; i < R; ++i) {
        if constexpr (LW == 8) {
            const __m512 s0 = _mm512_add_ps(acc[i][0], acc[i][1]), s2 = _mm512_add_ps(acc[i][2], acc[i][3]);
            const __m512 s1 = _mm512_add_ps(acc[i][4], acc[i][5]), s3 = _mm512_add_ps(acc[i][6], acc[i][7]);
            out[i] = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
        } else {
            out[i] = _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
        }
    }
}

// R query rows against the 16 rows of kt: out[i * ldo + t] for t < n.
template <int R>
inline void dot_tile(const KeyTile& kt, const float* a, float* out, std::int64_t ldo, __mmask16 store) {
    __m512 sum[R];
    if constexpr (R <= 2) {
        static constexpr int kAll[8] = {0, 4, 2, 6, 1, 5, 3, 7};
        lane_sums<R, 8>(kt, a, kAll, sum);
    } else {
        static constexpr int kFirst[4] = {0, 4, 2, 6}, kSecond[4] = {1, 5, 3, 7};
        __m512 first[R], second[R];
        lane_sums<R, 4>(kt, a, kFirst, first);
        lane_sums<R, 4>(kt, a, kSecond, second);
        for (int i = 0; i < R; ++i) sum[i] = _mm512_add_ps(first[i], second[i]);
    }
    for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(out + i * ldo, store, sum[i]);
}

}  // namespace

void dot_kv_rows_nvfp4_keys_avx512(const PagedRows& rows, std::int32_t page, int count, const float* a,
                                   std::int64_t arows, float* out, std::int64_t ldo) {
    const PageRows p = page_rows(rows, page);
    KeyTile kt;
    for (int t0 = 0; t0 < count; t0 += kKeys) {
        const int n = std::min(kKeys, count - t0);
        if (t0 + 2 * kKeys <= count) {
            // The next tile's codes (16 lines) and scales (2 lines) while this one is computed: decode reads its
            // KV blocks from memory, and a tile's 1 KB takes about as long to compute as to arrive.
            for (int t = 0; t < kKeys; ++t)
                _mm_prefetch(reinterpret_cast<const char*>(p.codes(t0 + kKeys + t)), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(p.block_scales(t0 + kKeys)), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(p.block_scales(t0 + kKeys) + 64), _MM_HINT_T0);
        }
        if (n == kKeys) {
            load_tile(p.codes(t0), kDim / 2, p.block_scales(t0), kt);
        } else {
            // A last partial tile: its rows copied, the last one repeated (those lanes are not stored).
            alignas(64) std::uint8_t codes[kKeys][kDim / 2], scales[kKeys][kScaleBytes];
            for (int t = 0; t < kKeys; ++t) {
                const int src = t0 + std::min(t, n - 1);
                std::memcpy(codes[t], p.codes(src), kDim / 2);
                std::memcpy(scales[t], p.block_scales(src), kScaleBytes);
            }
            load_tile(codes[0], kDim / 2, scales[0], kt);
        }
        const auto store = static_cast<__mmask16>((1u << n) - 1);
        for_row_tiles(
            arows, [&](auto mr, std::int64_t i0) { dot_tile<mr>(kt, a + i0 * kDim, out + i0 * ldo + t0, ldo, store); });
    }
}

}  // namespace msa::cpu
