// MXFP8 blocks (formats.md section 2): 32 consecutive E4M3 values along the reduction dimension share one UE8M0
// scale 2^(e-127).
#pragma once

#include <cstddef>
#include <cstdint>

namespace msa {

inline constexpr std::size_t kMxfp8BlockSize = 32;

// OCP MX v1.0 quantiser for activations: shared exponent floor(log2(amax)) - 8, clamped to the UE8M0 range,
// values divided by 2^exponent and cast to E4M3 (RNE, saturating). An all-zero block gets exponent code 0.
// n must be a multiple of 32. Writes n bytes of E4M3 to `values` and n/32 UE8M0 codes to `scales`.
void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales);

// out[i] = e4m3(values[i]) * 2^(scales[i/32] - 127).
void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out);

}  // namespace msa
