// Scalar number formats of formats.md section 1. Every narrowing cast rounds to nearest, ties to even.
// These functions are the reference; the bulk converters in convert.h must equal them bit for bit.
//
// They are constexpr and defined in this header (second half) so that kernels can inline them and tables can be
// built at compile time (format_tables.h). Bit-exact on any IEEE-754 machine with default floating-point modes.
#pragma once

#include <bit>
#include <cstdint>

namespace msa {

// What a narrowing cast does with a finite value beyond the format's largest finite value.
enum class Overflow {
    saturate,  // clamp to +-max finite ("satfinite", infinities too); the default everywhere in the engine
    ieee,      // E5M2/FP16: to +-inf; E4M3 (no infinities): to NaN (PyTorch's float8_e4m3fn cast)
};

// BF16: upper half of IEEE float32. Widening is exact (the bits shifted up, NaN payloads included). Narrowing
// rounds to nearest even; values past the bf16 maximum round to inf like IEEE; NaN stays NaN (sign and upper
// payload kept, quiet bit set).
constexpr float bf16_to_float(std::uint16_t bits);
constexpr std::uint16_t float_to_bf16(float value);

// FP16 (IEEE binary16), including subnormals. Overflow -> inf (ieee) or +-65504 (saturate, infinities too).
// NaN keeps its sign and upper payload and becomes quiet in both directions (what F16C's vcvtph2ps/vcvtps2ph do).
constexpr float fp16_to_float(std::uint16_t bits);
constexpr std::uint16_t float_to_fp16(float value, Overflow overflow = Overflow::ieee);

// E4M3 (float8_e4m3fn): bias 7, no inf, 0x7F/0xFF NaN, max 448, subnormals down to 2^-9.
// NaN input -> 0x7F (sign kept: 0xFF for negative NaN). Values at or below half the smallest subnormal -> +-0.
// Decoding a NaN code gives a quiet float NaN with the code's sign.
constexpr float e4m3_to_float(std::uint8_t bits);
constexpr std::uint8_t float_to_e4m3(float value, Overflow overflow = Overflow::saturate);

// E5M2: bias 15, IEEE-like (inf, NaN), max 57344; the upper byte of an FP16, so decoding equals
// fp16_to_float(bits << 8). NaN input -> 0x7F (sign kept).
constexpr float e5m2_to_float(std::uint8_t bits);
constexpr std::uint8_t float_to_e5m2(float value, Overflow overflow = Overflow::saturate);

// E2M1 (FP4): codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (code 8 decodes to -0). Encoding is
// always saturating (no inf/NaN): |x| > 6 -> 6, NaN -> 0, and a zero result is always code 0, never -0
// (formats.md section 3 step 4). Encoding is the ladder of formats.md section 3, which is round-to-nearest-even.
constexpr float e2m1_to_float(std::uint8_t code);
constexpr std::uint8_t float_to_e2m1(float value);

// UE8M0: value 2^(e-127); 0xFF is NaN. Code 0 is 2^-127 (a float32 subnormal).
constexpr float ue8m0_to_float(std::uint8_t bits);
// The UE8M0 code nearest to |value|, ties to the even code (round-to-nearest-even with no mantissa bits), clamped
// to [2^-127, 2^127]: zero and tiny values give code 0, huge values and inf give 254. NaN -> 0xFF.
constexpr std::uint8_t float_to_ue8m0(float value);

// UE4M3: E4M3 without a sign bit, used for block scales. The scales we store are F8_E4M3 codes with the sign bit
// clear, so ue4m3_to_float(b) == e4m3_to_float(b & 0x7F); 0x7F is NaN.
constexpr float ue4m3_to_float(std::uint8_t bits);
// Negative inputs (and -0) clamp to code 0; NaN -> 0x7F; otherwise as float_to_e4m3.
constexpr std::uint8_t float_to_ue4m3(float value, Overflow overflow = Overflow::saturate);

// ---------------------------------------------------------------------------------------------------------------
// Definitions.

namespace detail {

inline constexpr std::uint32_t kF32SignMask = 0x80000000u;
inline constexpr std::uint32_t kF32AbsMask = 0x7FFFFFFFu;
inline constexpr std::uint32_t kF32Inf = 0x7F800000u;
inline constexpr std::uint32_t kF32QuietBit = 0x00400000u;

constexpr std::uint32_t f32_bits(float value) {
    return std::bit_cast<std::uint32_t>(value);
}
constexpr float f32_from_bits(std::uint32_t bits) {
    return std::bit_cast<float>(bits);
}
constexpr float quiet_nan(bool negative) {
    return f32_from_bits((negative ? kF32SignMask : 0u) | kF32Inf | kF32QuietBit);
}

// Round-to-nearest-even of the integer `value` shifted right by `shift` (1 <= shift <= 31).
constexpr std::uint32_t shift_right_rne(std::uint32_t value, int shift) {
    const std::uint32_t half_minus_one = (1u << (shift - 1)) - 1u;
    const std::uint32_t lsb = (value >> shift) & 1u;
    return (value + half_minus_one + lsb) >> shift;
}

// A small binary floating-point format: sign bit on top, then exponent, then mantissa (IEEE layout).
struct MinifloatFormat {
    int mantissa_bits;
    int exponent_bias;
    int sign_shift;                    // bit position of the sign
    std::uint32_t max_finite_code;     // magnitude code of the largest finite value
    std::uint32_t ieee_overflow_code;  // magnitude code for Overflow::ieee: inf, or NaN in a format without inf
    std::uint32_t nan_code;            // magnitude code written for a NaN input
};

inline constexpr MinifloatFormat kE4M3Format{3, 7, 7, 0x7E, 0x7F, 0x7F};
inline constexpr MinifloatFormat kE5M2Format{2, 15, 7, 0x7B, 0x7C, 0x7F};
inline constexpr MinifloatFormat kFp16Format{10, 15, 15, 0x7BFF, 0x7C00, 0x7E00};

// Rounds |value| to the magnitude code of `format` (nearest, ties to even), without overflow handling: the
// result may exceed max_finite_code. `magnitude` is the float's bits without the sign and must not be NaN or inf.
constexpr std::uint32_t round_magnitude(std::uint32_t magnitude, const MinifloatFormat& format) {
    const int float_mantissa_drop = 23 - format.mantissa_bits;
    const int biased_exponent = static_cast<int>(magnitude >> 23);
    const int min_normal_exponent = 1 - format.exponent_bias;
    if (biased_exponent - 127 >= min_normal_exponent) {
        // Normal in the target: round the float's mantissa, then rebias. A carry into the exponent is correct.
        const std::uint32_t rebias = static_cast<std::uint32_t>(127 - format.exponent_bias) << format.mantissa_bits;
        return shift_right_rne(magnitude, float_mantissa_drop) - rebias;
    }
    // Subnormal (or zero) in the target: count units of the smallest subnormal 2^(min_normal_exponent - mantissa).
    const bool float_is_normal = biased_exponent != 0;
    const std::uint32_t significand = (magnitude & 0x7FFFFFu) | (float_is_normal ? 0x800000u : 0u);
    const int exponent = float_is_normal ? biased_exponent - 127 : -126;
    const int shift = float_mantissa_drop + (min_normal_exponent - exponent);
    return shift > 31 ? 0u : shift_right_rne(significand, shift);  // significand < 2^24, so shift > 31 rounds to 0
}

constexpr std::uint32_t encode_minifloat(float value, const MinifloatFormat& format, Overflow overflow) {
    const std::uint32_t bits = f32_bits(value);
    const std::uint32_t sign = (bits >> 31) << format.sign_shift;
    const std::uint32_t magnitude = bits & kF32AbsMask;
    if (magnitude > kF32Inf) {
        return sign | format.nan_code;
    }
    std::uint32_t code = magnitude == kF32Inf ? format.max_finite_code + 1 : round_magnitude(magnitude, format);
    if (code > format.max_finite_code) {
        code = overflow == Overflow::saturate ? format.max_finite_code : format.ieee_overflow_code;
    }
    return sign | code;
}

}  // namespace detail

constexpr float bf16_to_float(std::uint16_t bits) {
    return detail::f32_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

constexpr std::uint16_t float_to_bf16(float value) {
    const std::uint32_t bits = detail::f32_bits(value);
    if ((bits & detail::kF32AbsMask) > detail::kF32Inf) {
        return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, sign and upper payload kept
    }
    return static_cast<std::uint16_t>(detail::shift_right_rne(bits, 16));  // the carry may reach inf: IEEE overflow
}

constexpr float fp16_to_float(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0x1F) {
        return detail::f32_from_bits(sign | detail::kF32Inf | (mantissa != 0 ? detail::kF32QuietBit : 0u) |
                                     (mantissa << 13));
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return detail::f32_from_bits(sign | detail::f32_bits(magnitude));
    }
    return detail::f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

constexpr std::uint16_t float_to_fp16(float value, Overflow overflow) {
    const std::uint32_t bits = detail::f32_bits(value);
    if ((bits & detail::kF32AbsMask) > detail::kF32Inf) {  // quiet NaN, sign and upper payload kept
        return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits >> 13) & 0x3FFu));
    }
    return static_cast<std::uint16_t>(detail::encode_minifloat(value, detail::kFp16Format, overflow));
}

constexpr float e4m3_to_float(std::uint8_t bits) {
    const bool negative = (bits & 0x80u) != 0;
    const std::uint32_t exponent = (bits >> 3) & 0xFu;
    const std::uint32_t mantissa = bits & 0x7u;
    if ((bits & 0x7Fu) == 0x7Fu) {
        return detail::quiet_nan(negative);
    }
    const std::uint32_t sign = negative ? detail::kF32SignMask : 0u;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-9
        return detail::f32_from_bits(sign | detail::f32_bits(static_cast<float>(mantissa) * 0x1p-9f));
    }
    return detail::f32_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

constexpr std::uint8_t float_to_e4m3(float value, Overflow overflow) {
    return static_cast<std::uint8_t>(detail::encode_minifloat(value, detail::kE4M3Format, overflow));
}

constexpr float e5m2_to_float(std::uint8_t bits) {
    return fp16_to_float(static_cast<std::uint16_t>(bits << 8));
}

constexpr std::uint8_t float_to_e5m2(float value, Overflow overflow) {
    return static_cast<std::uint8_t>(detail::encode_minifloat(value, detail::kE5M2Format, overflow));
}

constexpr float e2m1_to_float(std::uint8_t code) {
    constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float magnitude = kMagnitudes[code & 0x7u];
    return (code & 0x8u) != 0 ? -magnitude : magnitude;
}

constexpr std::uint8_t float_to_e2m1(float value) {
    // formats.md section 3 step 3: |y| > 5 -> 6; >= 3.5 -> 4; > 2.5 -> 3; >= 1.75 -> 2; > 1.25 -> 1.5; >= 0.75 -> 1;
    // > 0.25 -> 0.5; else 0. The magnitude code counts the thresholds passed (no branches to mispredict); every
    // comparison is false for NaN, which therefore gives 0.
    const float a = value < 0.0f ? -value : value;
    const int magnitude =
        (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
    const bool negative = (detail::f32_bits(value) & detail::kF32SignMask) != 0;
    return static_cast<std::uint8_t>(negative && magnitude != 0 ? magnitude | 0x8 : magnitude);
}

constexpr float ue8m0_to_float(std::uint8_t bits) {
    if (bits == 0xFF) {
        return detail::quiet_nan(false);
    }
    if (bits == 0) {
        return detail::f32_from_bits(0x00400000u);  // 2^-127
    }
    return detail::f32_from_bits(static_cast<std::uint32_t>(bits) << 23);
}

constexpr std::uint8_t float_to_ue8m0(float value) {
    const std::uint32_t magnitude = detail::f32_bits(value) & detail::kF32AbsMask;
    if (magnitude > detail::kF32Inf) {
        return 0xFF;
    }
    if (magnitude >= 0x7F000000u) {  // 2^127 and above, inf included
        return 254;
    }
    if (magnitude < 0x00800000u) {               // below 2^-126: the neighbours are 2^-127 (code 0) and 2^-126 (code 1)
        return magnitude > 0x00600000u ? 1 : 0;  // the midpoint 1.5 * 2^-127 ties to the even code 0
    }
    return static_cast<std::uint8_t>(detail::shift_right_rne(magnitude, 23));
}

constexpr float ue4m3_to_float(std::uint8_t bits) {
    return e4m3_to_float(static_cast<std::uint8_t>(bits & 0x7Fu));
}

constexpr std::uint8_t float_to_ue4m3(float value, Overflow overflow) {
    const std::uint32_t bits = detail::f32_bits(value);
    if ((bits & detail::kF32AbsMask) > detail::kF32Inf) {
        return 0x7F;
    }
    if ((bits & detail::kF32SignMask) != 0) {
        return 0;
    }
    return float_to_e4m3(value, overflow);
}

}  // namespace msa
