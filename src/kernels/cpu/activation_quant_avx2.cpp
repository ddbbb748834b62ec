#include "kernels/cpu/activation_quant_avx2.h"

#include "kernels/cpu/fp_tables.h"

#include <immintrin.h>

namespace msa::cpu::avx2 {

float row_amax(const float* x, std::int64_t k) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    std::int64_t j = 0;
    // max_ps returns its second operand when either is NaN: a NaN element leaves the running maximum as it was.
    for (; j + 16 <= k; j += 16) {
        m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), m0);
        m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j + 8), abs_mask), m1);
    }
    for (; j + 8 <= k; j += 8) m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), m0);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
    float amax = 0.0f;
    for (float v : lanes) amax = v > amax ? v : amax;
    for (; j < k; ++j) {
        const float v = x[j] < 0 ? -x[j] : x[j];
        amax = v > amax ? v : amax;
    }
    return amax;
}

void unpack_doubled_e2m1(const std::uint8_t* packed, std::int64_t chunks, std::int8_t* out) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2m1Doubled)));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (std::int64_t c = 0; c < chunks; ++c) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + 32 * c));
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(b, low4));
        const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(b, 4), low4));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c + 32), hi);
    }
}

}  // namespace msa::cpu::avx2
