// Scalar number formats of formats.md section 1. Every narrowing cast rounds to nearest, ties to even.
// These functions are the reference; the bulk converters in convert.h must equal them bit for bit.
#pragma once

#include <cstdint>

namespace msa {

// What a narrowing cast does with a finite value beyond the format's largest finite value.
enum class Overflow {
    saturate,  // clamp to +-max finite ("satfinite"); the default everywhere in the engine
    ieee,      // E5M2/FP16: to +-inf; E4M3 (no infinities): to NaN (PyTorch's float8_e4m3fn cast)
};

// BF16: upper half of IEEE float32. NaN stays NaN (quiet). Overflow past bf16 max rounds to inf like IEEE.
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float value);

// FP16 (IEEE binary16), including subnormals. Overflow -> inf (ieee) or +-65504 (saturate).
float fp16_to_float(std::uint16_t bits);
std::uint16_t float_to_fp16(float value, Overflow overflow = Overflow::ieee);

// E4M3 (float8_e4m3fn): bias 7, no inf, 0x7F/0xFF NaN, max 448, subnormals down to 2^-9.
// NaN input -> 0x7F (sign kept: 0xFF for negative NaN). Values below half the smallest subnormal -> +-0.
float e4m3_to_float(std::uint8_t bits);
std::uint8_t float_to_e4m3(float value, Overflow overflow = Overflow::saturate);

// E5M2: bias 15, IEEE-like (inf, NaN), max 57344.
float e5m2_to_float(std::uint8_t bits);
std::uint8_t float_to_e5m2(float value, Overflow overflow = Overflow::saturate);

// E2M1 (FP4): codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Always saturating (no inf/NaN):
// |x| > 6 -> 6, NaN -> 0. -0 is returned as +0 (code 0), per formats.md section 3 step 4.
float e2m1_to_float(std::uint8_t code);
std::uint8_t float_to_e2m1(float value);

// UE8M0: value 2^(e-127); 0xFF is NaN.
float ue8m0_to_float(std::uint8_t bits);
// The UE8M0 code of the power of two nearest to |value| in log2 (ties up), clamped to [2^-127, 2^127]; NaN -> 0xFF.
std::uint8_t float_to_ue8m0(float value);

// UE4M3: E4M3 without a sign bit (8 bits: 4 exponent, 3 mantissa, bias 7; 0x7F and 0xFF are NaN... the block scales
// we store are F8_E4M3 codes with the sign bit clear, so ue4m3_to_float(b) == e4m3_to_float(b & 0x7F)).
float ue4m3_to_float(std::uint8_t bits);
// Negative inputs clamp to 0; otherwise as float_to_e4m3.
std::uint8_t float_to_ue4m3(float value, Overflow overflow = Overflow::saturate);

}  // namespace msa
