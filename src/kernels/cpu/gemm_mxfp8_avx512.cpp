// The small-batch MXFP8 GEMM of gemm_mxfp8_avx2.cpp on AVX-512 (gemm_avx512.h: two weight rows per register), with
// its results bit for bit: each half decodes its row's codes as the AVX2 integer loader does (sign-extend, shift,
// mask: e4m3 * 2^-120) times the same block factor, and blocks holding a code with exponent field 0 (found from the
// adopted weight's bitmap or from the codes, as there) take the same F16C decoding. Jobs the AVX2 kernel would give
// to its F16C loader (a block scale above kMxfp8MaxIntegerScale) or to its prefill route (more than 8 activation
// rows) stay on AVX2.

#include "kernels/cpu/avx512_prelude.h"

#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm_avx512.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/mxfp8_block_check.h"

#include <algorithm>

namespace msa::cpu {
namespace {

using BlockCheck = Mxfp8BlockCheck;

template <BlockCheck kCheck>
struct Mxfp8PairLoader : Mxfp8BlockFlags<kCheck> {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::int64_t ld;  // K
    const float* factors;
    const std::uint64_t* flags = nullptr;  // WeightView::mxfp8_exponent_zero_blocks (BlockCheck::bitmap)
    static constexpr int kBlock = 32;
    static constexpr int kPairsForOneRow = 2;
    static constexpr int kPrefetchEvery = 64;
    struct Row {
        const std::uint8_t* w;
        const std::uint8_t* s;
        const std::uint64_t* f;
    };
    using Scale = __m512;
    Row row(std::int64_t n) const {
        return {w + n * ld, scales + n * (ld / 32),
                kCheck == BlockCheck::bitmap ? flags + n * mxfp8_flag_words(ld) : nullptr};
    }
    const char* address(std::int64_t n, std::int64_t k) const { return reinterpret_cast<const char*>(w + n * ld + k); }
    Scale block_scale(const Row& a, const Row& b, std::int64_t k) const {
        return avx512::halves(_mm256_broadcast_ss(factors + a.s[k / 32]), _mm256_broadcast_ss(factors + b.s[k / 32]));
    }
    // Chunk c of the block at k of both rows: e4m3 * 2^-120 per half (see gemm_mxfp8_avx2.cpp), times the factors.
    __m512 chunk(const Row& a, const Row& b, Scale f, std::int64_t k, int c) const {
        const __m128i codes = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a.w + k + 8 * c)),
                                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.w + k + 8 * c)));
        const __m512i v = _mm512_cvtepi8_epi32(codes);
        const __m512i bits =
            _mm512_and_si512(_mm512_slli_epi32(v, 20), _mm512_set1_epi32(static_cast<int>(0x87F00000u)));
        return _mm512_mul_ps(_mm512_castsi512_ps(bits), f);
    }
    // The F16C decoding of a flagged block: e4m3 * 2^-8 times the factor times 2^-112, as the AVX2 loader's chunk_f16c.
    __m512 chunk_exact(const Row& a, const Row& b, Scale f, std::int64_t k, int c) const {
        const __m512 codes = avx512::e4m3x8_pair_times_2e_8(a.w + k + 8 * c, b.w + k + 8 * c);
        return _mm512_mul_ps(codes, _mm512_mul_ps(f, _mm512_set1_ps(0x1p-112f)));
    }
};

}  // namespace

void gemm_mxfp8_avx512(const GemmJob& job) {
    const std::uint8_t* s0 = job.w->scales + job.n0 * (job.w->cols / 32);
    const std::uint8_t* s1 = job.w->scales + job.n1 * (job.w->cols / 32);
    if (job.m > 8 || (s0 != s1 && *std::max_element(s0, s1) > kMxfp8MaxIntegerScale)) {
        gemm_mxfp8_avx2(job);
        return;
    }
    const auto* data = static_cast<const std::uint8_t*>(job.w->data);
    const float* f = mxfp8_block_factors(kMxfp8IntegerShift);
    avx512::in_pairs(
        job,
        [&](std::int64_t n1) {
            if (job.w->mxfp8_exponent_zero_blocks != nullptr) {
                const std::uint64_t* flags = job.w->mxfp8_exponent_zero_blocks;
                const Mxfp8PairLoader<BlockCheck::bitmap> loader{{}, data, job.w->scales, job.w->cols, f, flags};
                avx512::pair_gemm(job, n1, loader, 1.0f);
            } else {
                avx512::pair_gemm(job, n1, Mxfp8PairLoader<BlockCheck::codes>{{}, data, job.w->scales, job.w->cols, f},
                                  1.0f);
            }
        },
        [](const GemmJob& last) { gemm_mxfp8_avx2(last); });
}

}  // namespace msa::cpu
