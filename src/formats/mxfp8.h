// MXFP8 blocks (formats.md section 2): 32 consecutive E4M3 values along the reduction dimension share one UE8M0
// scale 2^(e-127).
//
// The bulk functions use AVX2 when cpu_features().avx2 is true and equal the scalar code bit for bit. Lengths that
// are not a multiple of 32 throw msa::Error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/scalar_formats.h"

namespace msa {

inline constexpr std::size_t kMxfp8BlockSize = 32;

// The OCP MX v1.0 shared-exponent rule for E4M3 elements as a UE8M0 code: floor(log2(amax)) - 8 + 127, clamped to
// [0, 254]. Zero (and any amax below 2^-119) gives 0, inf gives 254, NaN gives 0.
constexpr std::uint8_t mxfp8_scale_code(float amax) {
    constexpr int kE4M3MaxExponent = 8;  // 448 = 1.75 * 2^8
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(amax);
    if (bits == 0x7F800000u) return 254;                     // +inf (amax is never negative)
    if (bits > 0x7F800000u || bits < 0x00800000u) return 0;  // NaN, zero or subnormal: far below 2^-119
    const int floor_log2 = static_cast<int>(bits >> 23) - 127;
    const int exponent = floor_log2 - kE4M3MaxExponent;  // within [-134, 119]
    return static_cast<std::uint8_t>(exponent < -127 ? 0 : exponent + 127);
}

// 2^-e for the UE8M0 code of 2^e: what the quantiser multiplies by (dividing by 2^e and multiplying by 2^-e give the
// same float: both are powers of two in float range, and either operation rounds once).
constexpr float mxfp8_inverse_scale(std::uint8_t scale_code) {
    return ue8m0_to_float(static_cast<std::uint8_t>(254 - scale_code));
}

// OCP MX v1.0 quantiser for activations: shared exponent floor(log2(amax)) - 8, clamped to the UE8M0 range,
// values divided by 2^exponent and cast to E4M3 (RNE, saturating). An all-zero block gets exponent code 0.
// NaN values are ignored for amax and stay NaN (0x7F/0xFF); an infinity makes the exponent 127.
// n must be a multiple of 32. Writes n bytes of E4M3 to `values` and n/32 UE8M0 codes to `scales`.
void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales);

// out[i] = e4m3(values[i]) * 2^(scales[i/32] - 127) (one rounding; scale code 0xFF gives NaN).
void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out);

}  // namespace msa
