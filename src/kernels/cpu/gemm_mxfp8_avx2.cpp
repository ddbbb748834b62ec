// Float-activation GEMM for MXFP8 weights (E4M3 values, one UE8M0 scale per 32 along K) on AVX2/FMA/F16C.
//
// E4M3 -> float without a table (avx2::e4m3x8_times_2e_8, through F16C); the 2^8 is folded into the block scale
// (a power of two, so the product is exact): the weight is e4m3 * 2^(e - 127) exactly.
#include "kernels/cpu/gemm_avx2.h"

#include <array>
#include <bit>

namespace msa::cpu {
namespace {

// 2^(e - 127) * 2^8 for every UE8M0 code e. Codes whose factor leaves the float range give inf (never in real
// weights; 0xFF is NaN in the format).
const float* block_factors() {
    static const auto table = [] {
        std::array<float, 256> t{};
        for (int e = 0; e < 256; ++e) {
            const int exp = e - 127 + 8;
            t[e] = exp > 127 ? std::bit_cast<float>(0x7F800000u)
                             : std::bit_cast<float>(static_cast<std::uint32_t>(exp + 127) << 23);
        }
        return t;
    }();
    return table.data();
}

struct Mxfp8Loader {
    const std::uint8_t* w;
    const std::uint8_t* scales;
    std::size_t ld;  // K
    const float* factors;
    __m256 load(std::int64_t n, std::int64_t k) const {
        return _mm256_mul_ps(avx2::e4m3x8_times_2e_8(w + n * ld + k),
                             _mm256_broadcast_ss(factors + scales[n * (ld / 32) + k / 32]));
    }
    float scalar(std::int64_t, std::int64_t) const { return 0.0f; }  // K is a multiple of 32: no tail
};

}  // namespace

void gemm_mxfp8_avx2(const GemmJob& job) {
    avx2::gemm_rows(job,
                    Mxfp8Loader{static_cast<const std::uint8_t*>(job.w->data), job.w->scales,
                                static_cast<std::size_t>(job.w->cols), block_factors()},
                    1.0f);
}

}  // namespace msa::cpu
