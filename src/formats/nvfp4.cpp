// NVFP4 quantisers and dequantisers (formats.md sections 3-4): the scalar reference code, and the dispatch to the
// AVX2 versions (nvfp4_avx2.cpp), which equal it bit for bit.
#include "formats/nvfp4.h"

#include <algorithm>
#include <cmath>

#include "core/cpu_features.h"
#include "core/error.h"
#include "formats/bulk_avx2.h"
#include "formats/scalar_formats.h"

namespace msa {
namespace {

constexpr std::uint8_t kSmallestScaleCode = 0x01;  // 2^-9, the smallest E4M3 subnormal

void check_block_multiple(std::size_t n, const char* function) {
    MSA_CHECK(n % kNvfp4BlockSize == 0, "{}: the length {} is not a multiple of the NVFP4 block size {}.", function, n,
              kNvfp4BlockSize);
}

// The E2M1 codes of x[i] / scale (true FP32 division), packed two per byte.
void encode_block(const float* x, float scale, std::uint8_t* packed) {
    for (std::size_t i = 0; i < kNvfp4BlockSize; i += 2) {
        const std::uint8_t even = float_to_e2m1(x[i] / scale);
        const std::uint8_t odd = float_to_e2m1(x[i + 1] / scale);
        packed[i / 2] = static_cast<std::uint8_t>(even | (odd << 4));
    }
}

// The KV-insert quantiser of one block of x[i] * multiplier (formats.md section 3).
void quantize_block(const float* x, float multiplier, std::uint8_t* packed, std::uint8_t* scale_code) {
    float values[kNvfp4BlockSize];
    float amax = 0.0f;
    for (std::size_t i = 0; i < kNvfp4BlockSize; ++i) {
        values[i] = x[i] * multiplier;
        const float magnitude = std::fabs(values[i]);
        amax = magnitude > amax ? magnitude : amax;  // NaN never compares greater: ignored
    }
    *scale_code = nvfp4_scale_code(amax);
    encode_block(values, e4m3_to_float(*scale_code), packed);
}

void quantize_scalar(const float* x, std::size_t n, float multiplier, std::uint8_t* packed, std::uint8_t* scales) {
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        quantize_block(x + b * kNvfp4BlockSize, multiplier, packed + b * kNvfp4BlockSize / 2, scales + b);
    }
}

void quantize(const float* x, std::size_t n, float multiplier, std::uint8_t* packed, std::uint8_t* scales) {
    if (cpu_features().avx2) return avx2::nvfp4_quantize(x, n, multiplier, packed, scales);
    quantize_scalar(x, n, multiplier, packed, scales);
}

}  // namespace

void nvfp4_quantize(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales) {
    check_block_multiple(n, "nvfp4_quantize");
    quantize(x, n, 1.0f, packed, scales);
}

void nvfp4_quantize_activation_row(const float* x, std::size_t n, float row_scale, std::uint8_t* packed,
                                   std::uint8_t* scales) {
    check_block_multiple(n, "nvfp4_quantize_activation_row");
    quantize(x, n, row_scale, packed, scales);
}

void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float global_scale,
                      float* out) {
    check_block_multiple(n, "nvfp4_dequantize");
    if (cpu_features().avx2) return avx2::nvfp4_dequantize(packed, scales, n, global_scale, out);
    for (std::size_t i = 0; i < n; ++i) {
        const float scale = e4m3_to_float(scales[i / kNvfp4BlockSize]);
        out[i] = (e2m1_to_float(nvfp4_code(packed, i)) * scale) * global_scale;
    }
}

void nvfp4_dequantize_to_e4m3(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n,
                              std::uint8_t* out_e4m3) {
    check_block_multiple(n, "nvfp4_dequantize_to_e4m3");
    if (cpu_features().avx2) return avx2::nvfp4_dequantize_to_e4m3(packed, scales, n, out_e4m3);
    for (std::size_t i = 0; i < n; ++i) {
        const float product = e2m1_to_float(nvfp4_code(packed, i)) * e4m3_to_float(scales[i / kNvfp4BlockSize]);
        out_e4m3[i] = float_to_e4m3(product, Overflow::saturate);
    }
}

float nvfp4_quantize_weight(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales) {
    check_block_multiple(n, "nvfp4_quantize_weight");
    float amax = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
        amax = std::max(amax, std::fabs(x[i]));
    }
    float global_scale = amax / (448.0f * 6.0f);
    if (global_scale == 0.0f) global_scale = 1.0f;  // all-zero tensor (ModelOpt would divide by zero)

    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
        const float* block = x + b * kNvfp4BlockSize;
        float block_amax = 0.0f;
        for (std::size_t i = 0; i < kNvfp4BlockSize; ++i) {
            block_amax = std::max(block_amax, std::fabs(block[i]));
        }
        float scale = block_amax / (6.0f * global_scale);
        if (scale == 0.0f) scale = 1.0f;  // ModelOpt's rule for an all-zero block
        std::uint8_t code = float_to_e4m3(scale, Overflow::saturate);
        if ((code & 0x7F) == 0) code = kSmallestScaleCode;  // rounded to zero: keep the block representable
        scales[b] = code;
        encode_block(block, e4m3_to_float(code) * global_scale, packed + b * kNvfp4BlockSize / 2);
    }
    return global_scale;
}

}  // namespace msa
