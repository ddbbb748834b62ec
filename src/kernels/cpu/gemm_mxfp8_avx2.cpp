// Float-activation GEMM for MXFP8 weights (E4M3 values, one UE8M0 scale per 32 along K) on AVX2/FMA/F16C.
//
// Two exact E4M3 -> float decodings, both giving the weight e4m3 * 2^(e - 127) exactly, so either loader yields
// bit-identical results:
//  - integer (the fast one, 3 integer ops per 8 weights): sign-extend the code to 32 bits, shift left by 20 and keep
//    the sign and the 7 low code bits: the float bits s.0000eeee.mmm0... are the E4M3 value times 2^-120 for normals
//    and subnormals alike (an E4M3 subnormal lands on a float subnormal); the 2^120 goes into the block factor
//    2^(e - 7). That factor overflows for e > 134 (blocks with values beyond 2^7 * 448, never in real weights), so
//  - F16C (avx2::e4m3x8_times_2e_8, factor 2^(e - 119)) serves weights with such a scale anywhere in the job's rows.
#include "kernels/cpu/gemm_avx2.h"

#include <algorithm>
#include <array>
#include <bit>

namespace msa::cpu {
namespace {

// 2^(e - 127 + shift) for every UE8M0 code e; inf where that leaves the float range.
template <int kShift>
const float* block_factors() {
    static const auto table = [] {
        std::array<float, 256> t{};
        for (int e = 0; e < 256; ++e) {
            const int exp = e - 127 + kShift;
            t[e] = exp > 127 ? std::bit_cast<float>(0x7F800000u)
                             : std::bit_cast<float>(static_cast<std::uint32_t>(exp + 127) << 23);
        }
        return t;
    }();
    return table.data();
}

constexpr int kIntShift = 120;      // factor shift of the integer decoding
constexpr int kMaxIntScale = 134;   // largest UE8M0 code whose factor 2^(e - 7) is finite

// Eight E4M3 codes -> floats times 2^-120 (see the top of the file).
inline __m256 e4m3x8_times_2e_120(const std::uint8_t* codes) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(static_cast<int>(0x87F00000u))));
}

template <bool kInteger>
struct Mxfp8Loader {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::size_t ld;  // K
    const float* factors;
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
    };
    using Scale = __m256;
    Row row(std::int64_t n) const { return {w + n * ld, scales + n * (ld / 32)}; }
    Scale block_scale(const Row& r, std::int64_t k) const { return _mm256_broadcast_ss(factors + r.s[k / 32]); }
    __m256 chunk(const Row& r, Scale f, std::int64_t k, int c) const { return _mm256_mul_ps(codes8(r.w + k + 8 * c), f); }
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
        avx2::gemm_rows(job, Mxfp8Loader<true>{data, job.w->scales, K, block_factors<kIntShift>()}, 1.0f);
    } else {
        avx2::gemm_rows(job, Mxfp8Loader<false>{data, job.w->scales, K, block_factors<8>()}, 1.0f);
    }
}

}  // namespace msa::cpu
