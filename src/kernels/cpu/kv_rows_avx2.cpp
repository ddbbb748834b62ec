// AVX2 decoding of NVFP4 KV rows: 8 bytes -> 16 values per step (pshufb E2M1 table, times the block scale).
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/vec_math_avx2.h"

#include <algorithm>

namespace msa::cpu {
namespace {

// One NVFP4 block: 8 bytes of codes -> 16 values in element order (v0: 0-7, v1: 8-15), e2m1 * scale exactly (doubled
// integers times half the scale), rounded once to E4M3 in that read mode.
inline void decode16(const std::uint8_t* codes, float scale, KvRead mode, __m256& v0, __m256& v1) {
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1Doubled));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
    const __m128i lo = _mm_and_si128(b, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i ints = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));
    const __m256 half_scale = _mm256_set1_ps(0.5f * scale);
    v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ints)), half_scale);
    v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ints, 8))), half_scale);
    if (mode == KvRead::e4m3) {
        v0 = avx2::round_to_e4m3(v0);
        v1 = avx2::round_to_e4m3(v1);
    }
}

}  // namespace

void read_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out) {
    const int dim = rows.dim;
    const float* scale_table = e4m3_table();
    for (int t = 0; t < count; ++t) {
        const std::uint8_t* d = rows.row_data(page, t);
        const std::uint8_t* s = rows.row_scales(page, t);
        float* o = out + t * dim;
        for (int g = 0; g < dim / 16; ++g) {
            __m256 v0, v1;
            decode16(d + g * 8, scale_table[s[g]], mode, v0, v1);
            _mm256_storeu_ps(o + g * 16, v0);
            _mm256_storeu_ps(o + g * 16 + 8, v1);
        }
    }
}

// The fused decode-side product (kv_rows.h dot_kv_rows): each stored row's 16-value blocks are decoded exactly as
// above, in registers, and every query row's 8-lane accumulator takes them in K order with FMA, then the same fixed
// horizontal sum as gemm_nt_f32: identical sums, without writing and re-reading the decoded floats.
namespace {

// R query rows against stored rows [t0, t0 + T): one accumulator per (stored row, query row), so that few query rows
// (decode's index heads, or one head per task) still give the core several independent FMA chains; each chain is the
// one a single row would form.
template <int R, int T>
inline void dot_rows_step(const PagedRows& rows, std::int32_t page, int t0, KvRead mode, const float* a, float* out,
                          std::int64_t ldo) {
    const int dim = rows.dim;
    const float* scale_table = e4m3_table();
    const std::uint8_t* d[T];
    const std::uint8_t* s[T];
    for (int u = 0; u < T; ++u) {
        d[u] = rows.row_data(page, t0 + u);
        s[u] = rows.row_scales(page, t0 + u);
    }
    __m256 acc[T][R];
    for (int u = 0; u < T; ++u)
        for (int i = 0; i < R; ++i) acc[u][i] = _mm256_setzero_ps();
    for (int g = 0; g < dim / 16; ++g) {
        __m256 v0[T], v1[T];
        for (int u = 0; u < T; ++u) decode16(d[u] + g * 8, scale_table[s[u][g]], mode, v0[u], v1[u]);
        for (int i = 0; i < R; ++i) {
            const __m256 a0 = _mm256_loadu_ps(a + i * dim + g * 16);
            const __m256 a1 = _mm256_loadu_ps(a + i * dim + g * 16 + 8);
            for (int u = 0; u < T; ++u) {
                acc[u][i] = _mm256_fmadd_ps(a0, v0[u], acc[u][i]);
                acc[u][i] = _mm256_fmadd_ps(a1, v1[u], acc[u][i]);
            }
        }
    }
    for (int u = 0; u < T; ++u)
        for (int i = 0; i < R; ++i) out[i * ldo + t0 + u] = avx2::hsum(acc[u][i]);
}

template <int R>
void dot_rows_fixed(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a,
                           float* out, std::int64_t ldo) {
    constexpr int T = R == 1 ? 4 : (R == 2 ? 2 : 1);  // stored rows per pass: R * T chains
    int t = 0;
    for (; t + T <= count; t += T) dot_rows_step<R, T>(rows, page, t, mode, a, out, ldo);
    for (; t < count; ++t) dot_rows_step<R, 1>(rows, page, t, mode, a, out, ldo);
}

}  // namespace

void dot_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a,
                            std::int64_t arows, float* out, std::int64_t ldo) {
    const int dim = rows.dim;
    for (std::int64_t i0 = 0; i0 < arows; i0 += 4) {
        const float* ai = a + i0 * dim;
        float* oi = out + i0 * ldo;
        switch (std::min<std::int64_t>(4, arows - i0)) {
            case 1: dot_rows_fixed<1>(rows, page, count, mode, ai, oi, ldo); break;
            case 2: dot_rows_fixed<2>(rows, page, count, mode, ai, oi, ldo); break;
            case 3: dot_rows_fixed<3>(rows, page, count, mode, ai, oi, ldo); break;
            default: dot_rows_fixed<4>(rows, page, count, mode, ai, oi, ldo); break;
        }
    }
}

}  // namespace msa::cpu
