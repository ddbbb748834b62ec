#include "kernels/cpu/fp_tables.h"

#include "core/error.h"
#include "formats/scalar_formats.h"

#include <array>
#include <bit>
#include <cmath>

namespace msa::cpu {

const float* e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e4m3_to_float(static_cast<std::uint8_t>(i));
        return t;
    }();
    return table.data();
}

const float* e4m3_half_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = 0.5f * e4m3_table()[i];
        return t;
    }();
    return table.data();
}

namespace {

std::array<float, 256> block_factor_table(int shift) {
    std::array<float, 256> t{};
    for (int e = 0; e < 256; ++e) {
        const int exp = e - 127 + shift;
        t[e] = exp > 127 ? std::bit_cast<float>(0x7F800000u)
                         : std::bit_cast<float>(static_cast<std::uint32_t>(exp + 127) << 23);
    }
    return t;
}

}  // namespace

const float* mxfp8_block_factors(int shift) {
    static const std::array<float, 256> integer = block_factor_table(120), f16c = block_factor_table(8);
    MSA_CHECK(shift == 120 || shift == 8, "no MXFP8 block factor table for shift {}", shift);
    return shift == 120 ? integer.data() : f16c.data();
}

float round_to_e4m3(float x) {
    if (std::isnan(x)) return x;
    const float a = std::fabs(x);
    float r;
    if (a >= 448.0f) {
        r = 448.0f;
    } else if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9
        r = std::nearbyint(a * 512.0f) * (1.0f / 512.0f);
    } else {  // keep 3 mantissa bits, ties to even
        std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
        bits += 0x7FFFFu + ((bits >> 20) & 1u);
        bits &= 0xFFF00000u;
        r = std::bit_cast<float>(bits);
        if (r > 448.0f) r = 448.0f;
    }
    return std::copysign(r, x);
}

}  // namespace msa::cpu
