// AVX2 decoding of NVFP4 KV rows: 8 bytes -> 16 values per step (pshufb E2M1 table, times the block scale).
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/vec_math_avx2.h"

namespace msa::cpu {

void read_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out) {
    const int dim = rows.dim;
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1Doubled));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const float* scale_table = e4m3_table();
    for (int t = 0; t < count; ++t) {
        const std::uint8_t* d = rows.row_data(page, t);
        const std::uint8_t* s = rows.row_scales(page, t);
        float* o = out + t * dim;
        for (int g = 0; g < dim / 16; ++g) {
            const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(d + g * 8));
            const __m128i lo = _mm_and_si128(b, low4);
            const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
            const __m128i ints = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));  // 16 values, element order
            const __m256 scale = _mm256_set1_ps(0.5f * scale_table[s[g]]);
            __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ints)), scale);
            __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ints, 8))), scale);
            if (mode == KvRead::e4m3) {
                v0 = avx2::round_to_e4m3(v0);
                v1 = avx2::round_to_e4m3(v1);
            }
            _mm256_storeu_ps(o + g * 16, v0);
            _mm256_storeu_ps(o + g * 16 + 8, v1);
        }
    }
}

}  // namespace msa::cpu
