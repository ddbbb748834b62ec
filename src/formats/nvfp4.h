// NVFP4 blocks (formats.md sections 2-4): 16 values share one E4M3 scale; two E2M1 codes per byte, element 2i in
// the low nibble and 2i+1 in the high nibble. Weights may carry an FP32 global scale (`weight_scale_2`);
// the KV cache has none (global scale 1).
//
// The bulk functions use AVX2 when cpu_features().avx2 is true and equal the scalar code bit for bit. Lengths that
// are not a multiple of 16 throw msa::Error. NaN inputs are ignored when taking a block's amax and quantise to
// code 0; infinities count as amax (scale 448) and quantise to +-6.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/scalar_formats.h"

namespace msa {

inline constexpr std::size_t kNvfp4BlockSize = 16;

// The E2M1 code of element i of a packed NVFP4 array.
inline std::uint8_t nvfp4_code(const std::uint8_t* packed, std::size_t i) {
    return static_cast<std::uint8_t>((packed[i / 2] >> ((i % 2) * 4)) & 0xFu);
}
// Replaces the E2M1 code of element i (code < 16).
inline void nvfp4_set_code(std::uint8_t* packed, std::size_t i, std::uint8_t code) {
    const unsigned shift = (i % 2) * 4;
    packed[i / 2] = static_cast<std::uint8_t>((packed[i / 2] & ~(0xFu << shift)) | ((code & 0xFu) << shift));
}

// Steps 1-2 of formats.md section 3: the E4M3 scale code of a block whose max |x| is `amax`:
// E4M3_RN(max(amax, 1e-12) / 6) (FP32 division), clamped to [2^-9, 448]. NaN amax gives the smallest scale.
constexpr std::uint8_t nvfp4_scale_code(float amax) {
    const float floored = amax > 1e-12f ? amax : 1e-12f;  // NaN takes the floor too
    const std::uint8_t code = float_to_e4m3(floored / 6.0f, Overflow::saturate);
    return code > 0 ? code : 1;  // at least the smallest subnormal, 2^-9
}

// KV-insert quantiser, exactly formats.md section 3: per 16 values amax = max(max|x|, 1e-12),
// scale = E4M3_RN(amax / 6) clamped to [2^-9, 448], y = x / scale (FP32 division), E2M1 with the ladder of
// section 3, -0 stored as +0. n must be a multiple of 16. Writes n/2 bytes to `packed` and n/16 to `scales`.
void nvfp4_quantize(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales);

// Exact dequantisation: out[i] = (e2m1 * scale) * global_scale (formats.md section 4, first bullet; the product
// e2m1 * scale is exact, the multiplication by global_scale rounds once). Scales decode as F8_E4M3.
void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float global_scale,
                      float* out);

// Reference Q8KV4 dequantisation: out[i] = E4M3 code of E4M3_satfinite_RN(e2m1 * scale) (formats.md section 4,
// second bullet; one rounding of the exact product; see kNvfp4E4M3Product in format_tables.h). Global scale 1.
void nvfp4_dequantize_to_e4m3(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n,
                              std::uint8_t* out_e4m3);

// ModelOpt weight quantiser (used by checkpoint generators and tests): global_scale = amax(all) / (448 * 6);
// per block scale = E4M3_RN(block_amax / (6 * global_scale)), an all-zero block getting scale 1;
// codes = E2M1_RN(x / (scale * global_scale)). Returns the global scale (weight_scale_2).
// Where ModelOpt would divide by zero we do not: an all-zero tensor gets global scale 1, and a non-zero block whose
// scale rounds to E4M3 zero gets the smallest scale 2^-9 instead.
float nvfp4_quantize_weight(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales);

// M3.1 W4A4 activation quantisation of one row (model.md section 4): the row is multiplied by `row_scale`
// (FC1: 2688 / row_amax; FC2: 16), then quantised per 16 values with the KV-insert quantiser rule above.
// The caller multiplies the GEMM output row by 1 / row_scale.
void nvfp4_quantize_activation_row(const float* x, std::size_t n, float row_scale, std::uint8_t* packed,
                                   std::uint8_t* scales);

}  // namespace msa
