// The small-batch BF16 GEMM of gemm_bf16_avx2.cpp (the lm_head of the models) on AVX-512 (gemm_avx512.h: two weight
// rows per register), with its results bit for bit: each half widens its row's 8 BF16 values to the top halves of
// FP32 words, as the AVX2 loader does. More than 8 activation rows (the prefill route) stay on AVX2.

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/gemm_avx512.h"

namespace msa::cpu {
namespace {

struct Bf16PairLoader {
    const std::uint16_t* w;
    std::int64_t ld;
    static constexpr int kBlock = 32;
    static constexpr int kPairsForOneRow = 4;
    static constexpr int kPrefetchEvery = 32;
    struct NoScale {};
    using Row = const std::uint16_t*;
    using Scale = NoScale;
    Row row(std::int64_t n) const { return w + n * ld; }
    const char* address(std::int64_t n, std::int64_t k) const { return reinterpret_cast<const char*>(w + n * ld + k); }
    Scale block_scale(Row, Row, std::int64_t) const { return {}; }
    __m512 chunk(Row a, Row b, Scale, std::int64_t k, int c) const {
        const __m256i h = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k + 8 * c))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k + 8 * c)), 1);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
};

}  // namespace

void gemm_bf16_avx512(const GemmJob& job) {
    if (job.m > 8 || job.w->cols % Bf16PairLoader::kBlock != 0) {
        gemm_bf16_avx2(job);
        return;
    }
    const Bf16PairLoader loader{static_cast<const std::uint16_t*>(job.w->data), job.w->cols};
    avx512::in_pairs(
        job, [&](std::int64_t n1) { avx512::pair_gemm(job, n1, loader, 1.0f); },
        [](const GemmJob& last) { gemm_bf16_avx2(last); });
}

}  // namespace msa::cpu
