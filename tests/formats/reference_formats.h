// An independent model of the number formats for the tests, written from the textbook definitions and sharing no
// code with src/formats: decoding by the formula sign * 2^(e - bias) * (1 + f / 2^m) in double precision, and
// encoding by searching the sorted list of representable values for the nearest one (ties to the even code).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace msa::test {

// How a format spends its all-ones exponent.
enum class Specials {
    ieee,        // all-ones exponent: inf (mantissa 0) or NaN (BF16, FP16, E5M2)
    finite_nan,  // only the all-ones magnitude is NaN, no inf (E4M3 "fn")
    none,        // every code is a finite number (E2M1)
};

struct FormatSpec {
    std::string name;
    int exponent_bits;
    int mantissa_bits;
    int bias;
    Specials specials;

    int bits() const { return 1 + exponent_bits + mantissa_bits; }
    std::uint32_t code_count() const { return 1u << bits(); }
    std::uint32_t sign_bit() const { return 1u << (bits() - 1); }
};

inline const FormatSpec kRefBf16{"bf16", 8, 7, 127, Specials::ieee};
inline const FormatSpec kRefFp16{"fp16", 5, 10, 15, Specials::ieee};
inline const FormatSpec kRefE4M3{"e4m3", 4, 3, 7, Specials::finite_nan};
inline const FormatSpec kRefE5M2{"e5m2", 5, 2, 15, Specials::ieee};
inline const FormatSpec kRefE2M1{"e2m1", 2, 1, 1, Specials::none};

// The value of a code (NaN for NaN codes, +-inf for infinities).
inline double ref_decode(const FormatSpec& f, std::uint32_t code) {
    const bool negative = (code & f.sign_bit()) != 0;
    const std::uint32_t magnitude = code & (f.sign_bit() - 1);
    const std::uint32_t exponent = magnitude >> f.mantissa_bits;
    const std::uint32_t fraction = magnitude & ((1u << f.mantissa_bits) - 1);
    const std::uint32_t all_ones_exponent = (1u << f.exponent_bits) - 1;
    double value;
    if (f.specials == Specials::ieee && exponent == all_ones_exponent) {
        value = fraction == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else if (f.specials == Specials::finite_nan && magnitude == f.sign_bit() - 1) {
        value = std::numeric_limits<double>::quiet_NaN();
    } else if (exponent == 0) {
        value = std::ldexp(static_cast<double>(fraction), 1 - f.bias - f.mantissa_bits);
    } else {
        value = std::ldexp(static_cast<double>((1u << f.mantissa_bits) + fraction),
                           static_cast<int>(exponent) - f.bias - f.mantissa_bits);
    }
    return negative ? -value : value;
}

inline bool ref_is_nan_code(const FormatSpec& f, std::uint32_t code) {
    return std::isnan(ref_decode(f, code));
}

// The magnitude codes of the finite non-negative values, by increasing value (the code order, for these formats).
struct Ladder {
    std::vector<double> values;
    std::vector<std::uint32_t> codes;
};

inline Ladder ref_ladder(const FormatSpec& f) {
    Ladder ladder;
    for (std::uint32_t code = 0; code < f.sign_bit(); ++code) {
        const double v = ref_decode(f, code);
        if (std::isfinite(v)) {
            ladder.values.push_back(v);
            ladder.codes.push_back(code);
        }
    }
    return ladder;
}

enum class RefOverflow { saturate, ieee };

// Round-to-nearest-even of x by search. Returns std::nullopt when the result is NaN (NaN input, or ieee overflow
// in a format without inf); the caller checks the sign of NaN results separately where it matters.
inline std::optional<std::uint32_t> ref_encode(const FormatSpec& f, const Ladder& ladder, float x,
                                               RefOverflow overflow) {
    if (std::isnan(x)) return std::nullopt;
    const std::uint32_t sign = std::signbit(x) ? f.sign_bit() : 0u;
    const double a = std::fabs(static_cast<double>(x));
    const double max = ladder.values.back();
    const std::uint32_t max_code = ladder.codes.back();
    // The value the next code would have if the format went on: the same spacing as the top binade.
    const double virtual_next = max + (max - ladder.values[ladder.values.size() - 2]);
    const double overflow_threshold = (max + virtual_next) / 2;
    const bool overflows = a > overflow_threshold || (a == overflow_threshold && (max_code & 1u) != 0);
    if (overflows) {
        if (overflow == RefOverflow::saturate || f.specials == Specials::none) return sign | max_code;
        if (f.specials == Specials::finite_nan) return std::nullopt;
        return sign | (((1u << f.exponent_bits) - 1) << f.mantissa_bits);  // inf
    }
    const auto upper = std::lower_bound(ladder.values.begin(), ladder.values.end(), a);
    if (upper == ladder.values.end()) return sign | max_code;  // between max and the overflow threshold
    const std::size_t hi = static_cast<std::size_t>(upper - ladder.values.begin());
    if (*upper == a || hi == 0) return sign | ladder.codes[hi];
    const std::size_t lo = hi - 1;
    const double below = a - ladder.values[lo];
    const double above = ladder.values[hi] - a;
    std::size_t pick = below < above ? lo : hi;
    if (below == above) pick = (ladder.codes[lo] & 1u) == 0 ? lo : hi;
    return sign | ladder.codes[pick];
}

// Bit-level helpers.
inline std::uint32_t bits_of(float x) {
    return std::bit_cast<std::uint32_t>(x);
}
inline float float_of(std::uint32_t bits) {
    return std::bit_cast<float>(bits);
}

// True when a and b are the same float, or both NaN.
inline bool same_float(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}
inline bool same_value(float a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return static_cast<double>(a) == b && std::signbit(a) == std::signbit(b);
}

}  // namespace msa::test
