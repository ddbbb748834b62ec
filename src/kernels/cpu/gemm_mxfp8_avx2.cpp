// Float-activation GEMM for MXFP8 weights (E4M3 values, one UE8M0 scale per 32 along K) on AVX2/FMA/F16C.
//
// Two exact E4M3 -> float decodings, both giving the weight e4m3 * 2^(e - 127) exactly, so either loader yields
// bit-identical results:
//  - integer (the fast one, 3 integer ops per 8 weights): sign-extend the code to 32 bits, shift left by 20 and keep
//    the sign and the 7 low code bits: the float bits s.0000eeee.mmm0... are the E4M3 value times 2^-120 for normals
//    and subnormals alike (an E4M3 subnormal lands on a float subnormal); the 2^120 goes into the block factor
//    2^(e - 7). That factor overflows for e > 134 (blocks with values beyond 2^7 * 448, never in real weights), so
//  - F16C (avx2::e4m3x8_times_2e_8, factor 2^(e - 119)) serves weights with such a scale anywhere in the job's rows.
// Subnormals: the integer decoding turns an E4M3 subnormal into a float subnormal, and a multiply with a subnormal
// input is slow on x86 (a microcode assist: with random codes, 11% of them subnormal, the small-batch route ran at
// 4.7 instead of 12.4 GB/s on this project's AMD EPYC and at 0.28 GB/s on an Intel Xeon). Real quantised weights
// hardly ever hold such codes (they are below 2^-14 of their block's largest value), but a block that does is
// decoded by F16C in the small-batch route: small_tile checks each 32-weight block of a tile's rows (2 vector ops
// per row; zeros are flagged too, harmlessly), about 10% of the in-cache GEMV time, or, for weights the CPU backend
// adopted, tests one bit per row and block in the bitmap it computed (WeightView::mxfp8_exponent_zero_blocks). The
// prefill route decodes each weight once per panel for many rows and keeps the integer decoding.
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/mxfp8_block_check.h"

#include <algorithm>

namespace msa::cpu {
namespace {

constexpr int kIntShift = kMxfp8IntegerShift;  // factor shift of the integer decoding
constexpr int kMaxIntScale = kMxfp8MaxIntegerScale;

// Eight E4M3 codes -> floats times 2^-120 (see the top of the file).
inline __m256 e4m3x8_times_2e_120(const std::uint8_t* codes) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(static_cast<int>(0x87F00000u))));
}

// How the small-batch route finds blocks holding a code with exponent field 0: not at all (the F16C loader needs
// no check), from the weight's precomputed bitmap, or by looking at the codes.
using BlockCheck = Mxfp8BlockCheck;

template <bool kInteger, BlockCheck kCheck = BlockCheck::none>
struct Mxfp8Loader : Mxfp8BlockFlags<kCheck> {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::size_t ld;  // K
    const float* factors;
    const std::uint64_t* flags = nullptr;  // WeightView::mxfp8_exponent_zero_blocks (BlockCheck::bitmap)
    static __m256 codes8(const std::uint8_t* p) {
        if constexpr (kInteger) {
            return e4m3x8_times_2e_120(p);
        } else {
            return avx2::e4m3x8_times_2e_8(p);
        }
    }
    static constexpr int kBlock = 32;
    static constexpr int kPrefetchEvery = 64;
    struct Row {
        const std::uint8_t* w;
        const std::uint8_t* s;
        const std::uint64_t* f;  // the row's words of the bitmap (BlockCheck::bitmap)
    };
    using Scale = __m256;
    Row row(std::int64_t n) const {
        return {w + n * ld, scales + n * (ld / 32),
                kCheck == BlockCheck::bitmap ? flags + n * mxfp8_flag_words(static_cast<std::int64_t>(ld)) : nullptr};
    }
    Scale block_scale(const Row& r, std::int64_t k) const { return _mm256_broadcast_ss(factors + r.s[k / 32]); }
    __m256 chunk(const Row& r, Scale f, std::int64_t k, int c) const { return _mm256_mul_ps(codes8(r.w + k + 8 * c), f); }
    // small_tile's check of each block (Mxfp8BlockFlags): a flagged block takes chunk_f16c, the F16C decoding with
    // the factor times 2^-112 (= 2^(e - 119), exact).
    __m256 chunk_f16c(const Row& r, Scale f, std::int64_t k, int c) const {
        return _mm256_mul_ps(avx2::e4m3x8_times_2e_8(r.w + k + 8 * c), _mm256_mul_ps(f, _mm256_set1_ps(0x1p-112f)));
    }
    const char* address(std::int64_t n, std::int64_t k) const { return reinterpret_cast<const char*>(w + n * ld + k); }
    __m256 load(std::int64_t n, std::int64_t k) const {
        return _mm256_mul_ps(codes8(w + n * ld + k), _mm256_broadcast_ss(factors + scales[n * (ld / 32) + k / 32]));
    }
    float scalar(std::int64_t, std::int64_t) const { return 0.0f; }  // K is a multiple of 32: no tail
};

}  // namespace

void gemm_mxfp8_avx2(const GemmJob& job) {
    const auto* data = static_cast<const std::uint8_t*>(job.w->data);
    const auto K = static_cast<std::size_t>(job.w->cols);
    const std::uint8_t* s0 = job.w->scales + job.n0 * (job.w->cols / 32);
    const std::uint8_t* s1 = job.w->scales + job.n1 * (job.w->cols / 32);
    if (s0 == s1 || *std::max_element(s0, s1) <= kMaxIntScale) {
        const float* f = mxfp8_block_factors(kIntShift);
        if (job.w->mxfp8_exponent_zero_blocks != nullptr) {
            const std::uint64_t* flags = job.w->mxfp8_exponent_zero_blocks;
            avx2::gemm_rows(job, Mxfp8Loader<true, BlockCheck::bitmap>{{}, data, job.w->scales, K, f, flags}, 1.0f);
        } else {
            avx2::gemm_rows(job, Mxfp8Loader<true, BlockCheck::codes>{{}, data, job.w->scales, K, f}, 1.0f);
        }
    } else {
        avx2::gemm_rows(job, Mxfp8Loader<false>{{}, data, job.w->scales, K, mxfp8_block_factors(8)}, 1.0f);
    }
}

}  // namespace msa::cpu
