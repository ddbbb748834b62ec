// MXFP8 quantiser and dequantiser (formats.md section 2): the scalar reference code, and the dispatch to the AVX2
// versions (mxfp8_avx2.cpp), which equal it bit for bit.
#include "formats/mxfp8.h"

#include <cmath>

#include "core/cpu_features.h"
#include "core/error.h"
#include "formats/bulk_avx2.h"
#include "formats/scalar_formats.h"

namespace msa {
namespace {

void check_block_multiple(std::size_t n, const char* function) {
    MSA_CHECK(n % kMxfp8BlockSize == 0, "{}: the length {} is not a multiple of the MXFP8 block size {}.", function, n,
              kMxfp8BlockSize);
}

}  // namespace

void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales) {
    check_block_multiple(n, "mxfp8_quantize");
    if (cpu_features().avx2) return avx2::mxfp8_quantize(x, n, values, scales);
    for (std::size_t b = 0; b < n / kMxfp8BlockSize; ++b) {
        const float* block = x + b * kMxfp8BlockSize;
        float amax = 0.0f;
        for (std::size_t i = 0; i < kMxfp8BlockSize; ++i) {
            const float magnitude = std::fabs(block[i]);
            amax = magnitude > amax ? magnitude : amax;  // NaN never compares greater: ignored
        }
        scales[b] = mxfp8_scale_code(amax);
        const float inverse_scale = mxfp8_inverse_scale(scales[b]);
        for (std::size_t i = 0; i < kMxfp8BlockSize; ++i) {
            values[b * kMxfp8BlockSize + i] = float_to_e4m3(block[i] * inverse_scale, Overflow::saturate);
        }
    }
}

void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out) {
    check_block_multiple(n, "mxfp8_dequantize");
    if (cpu_features().avx2) return avx2::mxfp8_dequantize(values, scales, n, out);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = e4m3_to_float(values[i]) * ue8m0_to_float(scales[i / kMxfp8BlockSize]);
    }
}

}  // namespace msa
