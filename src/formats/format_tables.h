// Lookup tables for kernels, built at compile time from the scalar reference functions (scalar_formats.h), so a
// table entry equals the function for every code by construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "formats/scalar_formats.h"

namespace msa {

namespace detail {

template <std::size_t N, typename Fn>
constexpr std::array<float, N> make_decode_table(Fn decode) {
    std::array<float, N> table{};
    for (std::size_t code = 0; code < N; ++code) {
        table[code] = decode(static_cast<std::uint8_t>(code));
    }
    return table;
}

// [scale code][E2M1 code] -> E4M3 code of E4M3_satfinite_RN(e2m1 * scale).
constexpr std::array<std::array<std::uint8_t, 16>, 256> make_nvfp4_e4m3_product_table() {
    std::array<std::array<std::uint8_t, 16>, 256> table{};
    for (std::size_t scale = 0; scale < 256; ++scale) {
        for (std::size_t code = 0; code < 16; ++code) {
            const float s = e4m3_to_float(static_cast<std::uint8_t>(scale));
            // A NaN scale (codes 0x7F, 0xFF) gives its NaN: the product would be that NaN, and clang refuses a
            // constant expression whose arithmetic produces a NaN.
            const float product = s != s ? s : e2m1_to_float(static_cast<std::uint8_t>(code)) * s;
            table[scale][code] = float_to_e4m3(product, Overflow::saturate);
        }
    }
    return table;
}

}  // namespace detail

// code -> value for every code (NaN codes hold the NaN the scalar decoder returns).
inline constexpr std::array<float, 16> kE2M1ToFloat =
    detail::make_decode_table<16>([](std::uint8_t c) { return e2m1_to_float(c); });
inline constexpr std::array<float, 256> kE4M3ToFloat =
    detail::make_decode_table<256>([](std::uint8_t c) { return e4m3_to_float(c); });
inline constexpr std::array<float, 256> kE5M2ToFloat =
    detail::make_decode_table<256>([](std::uint8_t c) { return e5m2_to_float(c); });
inline constexpr std::array<float, 256> kUE8M0ToFloat =
    detail::make_decode_table<256>([](std::uint8_t c) { return ue8m0_to_float(c); });

// NVFP4 -> E4M3 with one rounding (the reference Q8KV4 dequantisation, formats.md section 4):
// kNvfp4E4M3Product[scale_code][e2m1_code] == float_to_e4m3(e2m1_to_float(e2m1_code) * e4m3_to_float(scale_code)).
// One 16-byte row per scale: a ready-made pshufb / PRMT table for a block.
inline constexpr std::array<std::array<std::uint8_t, 16>, 256> kNvfp4E4M3Product =
    detail::make_nvfp4_e4m3_product_table();

}  // namespace msa
