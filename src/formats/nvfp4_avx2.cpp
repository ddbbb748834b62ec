// AVX2 NVFP4 quantiser and dequantisers; equal to the scalar code of nvfp4.cpp bit for bit.
#include <immintrin.h>

#include "formats/bulk_avx2.h"
#include "formats/format_tables.h"
#include "formats/nvfp4.h"
#include "formats/simd_avx2.h"

namespace msa::avx2 {

namespace {

constexpr std::size_t kBlocksPerGroup = 8;  // one scale per lane: the scale codes of 8 blocks in one vector

// The block's 16 values times the multiplier.
struct BlockValues {
    __m256 lo, hi;
};

BlockValues load_block(const float* block, __m256 multiplier) {
    return {_mm256_mul_ps(_mm256_loadu_ps(block), multiplier), _mm256_mul_ps(_mm256_loadu_ps(block + 8), multiplier)};
}

float block_amax(const BlockValues& v) {
    return horizontal_max(_mm256_max_ps(abs_or_zero_if_nan(v.lo), abs_or_zero_if_nan(v.hi)));
}

// nvfp4_scale_code for 8 amax values (never NaN) in one vector: E4M3_RN(max(amax, 1e-12) / 6), at least 2^-9.
__m256i scale_codes_x8(__m256 amax) {
    const __m256 floored = _mm256_max_ps(amax, _mm256_set1_ps(1e-12f));
    const __m256i codes = float_to_e4m3x8_saturate(_mm256_div_ps(floored, _mm256_set1_ps(6.0f)));
    return _mm256_max_epi32(codes, _mm256_set1_epi32(1));
}

// Step 3 of formats.md section 3 for one block with its scale: true FP32 division, then the E2M1 ladder.
void encode_block(const BlockValues& v, std::uint8_t scale_code, std::uint8_t* packed) {
    const __m256 scale = _mm256_set1_ps(kE4M3ToFloat[scale_code]);
    const __m256i codes_lo = float_to_e2m1x8(_mm256_div_ps(v.lo, scale));
    const __m256i codes_hi = float_to_e2m1x8(_mm256_div_ps(v.hi, scale));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(packed), nvfp4_pack16(pack_u32x16_to_u8(codes_lo, codes_hi)));
}

}  // namespace

void nvfp4_quantize(const float* x, std::size_t n, float multiplier, std::uint8_t* packed, std::uint8_t* scales) {
    const __m256 m = _mm256_set1_ps(multiplier);
    const std::size_t blocks = n / kNvfp4BlockSize;
    std::size_t b = 0;
    // Groups of 8 blocks: the scale codes are computed in one vector, without the scalar encoder's branches.
    for (; b + kBlocksPerGroup <= blocks; b += kBlocksPerGroup) {
        alignas(32) float amax[kBlocksPerGroup];
        for (std::size_t j = 0; j < kBlocksPerGroup; ++j) {
            amax[j] = block_amax(load_block(x + (b + j) * kNvfp4BlockSize, m));
        }
        alignas(32) std::int32_t codes[kBlocksPerGroup];
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes), scale_codes_x8(_mm256_load_ps(amax)));
        for (std::size_t j = 0; j < kBlocksPerGroup; ++j) {
            const auto code = static_cast<std::uint8_t>(codes[j]);
            encode_block(load_block(x + (b + j) * kNvfp4BlockSize, m), code, packed + (b + j) * kNvfp4BlockSize / 2);
            scales[b + j] = code;
        }
    }
    for (; b < blocks; ++b) {
        const BlockValues v = load_block(x + b * kNvfp4BlockSize, m);
        scales[b] = nvfp4_scale_code(block_amax(v));
        encode_block(v, scales[b], packed + b * kNvfp4BlockSize / 2);
    }
}

void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float global_scale,
                      float* out) {
    const __m256 global = _mm256_set1_ps(global_scale);
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const __m128i codes = nvfp4_unpack16(packed + b * kNvfp4BlockSize / 2);
        const __m256 scale = _mm256_set1_ps(kE4M3ToFloat[scales[b]]);
        const __m256 lo = e2m1x8_to_float(_mm256_cvtepu8_epi32(codes));
        const __m256 hi = e2m1x8_to_float(_mm256_cvtepu8_epi32(_mm_srli_si128(codes, 8)));
        float* dst = out + b * kNvfp4BlockSize;
        _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_mul_ps(lo, scale), global));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_mul_ps(hi, scale), global));
    }
}

void nvfp4_dequantize_to_e4m3(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n,
                              std::uint8_t* out_e4m3) {
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const __m128i products = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kNvfp4E4M3Product[scales[b]].data()));
        const __m128i codes = nvfp4_unpack16(packed + b * kNvfp4BlockSize / 2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out_e4m3 + b * kNvfp4BlockSize), _mm_shuffle_epi8(products, codes));
    }
}

}  // namespace msa::avx2
