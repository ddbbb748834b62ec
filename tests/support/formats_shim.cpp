// TEMPORARY: minimal implementations of the formats/ functions the kernel tests need, linked only while msa_formats
// has no sources in this branch (the formats developer's implementation replaces it; this file is then deleted).
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace msa {

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
std::uint16_t float_to_bf16(float value) {
    std::uint32_t b = std::bit_cast<std::uint32_t>(value);
    if (std::isnan(value)) return static_cast<std::uint16_t>((b >> 16) | 0x40);
    b += 0x7FFF + ((b >> 16) & 1);
    return static_cast<std::uint16_t>(b >> 16);
}
float fp16_to_float(std::uint16_t bits) {
    const int s = bits >> 15, e = (bits >> 10) & 31, m = bits & 1023;
    float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                     : (e == 31 ? (m ? NAN : INFINITY) : std::ldexp(static_cast<float>(m | 1024), e - 25));
    return s ? -v : v;
}
float e4m3_to_float(std::uint8_t bits) {
    const int s = bits >> 7, e = (bits >> 3) & 15, m = bits & 7;
    if (e == 15 && m == 7) return NAN;
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(m | 8), e - 10);
    return s ? -v : v;
}
std::uint8_t float_to_e4m3(float value, Overflow) {
    if (std::isnan(value)) return std::signbit(value) ? 0xFF : 0x7F;
    // Search the nearest code (ties to even mantissa) among the 127 non-negative finite codes.
    const float a = std::min(std::fabs(value), 448.0f);
    int best = 0;
    float best_d = INFINITY;
    for (int c = 0; c < 127; ++c) {
        const float d = std::fabs(e4m3_to_float(static_cast<std::uint8_t>(c)) - a);
        if (d < best_d || (d == best_d && (c & 1) == 0)) { best = c; best_d = d; }
    }
    return static_cast<std::uint8_t>(best | (std::signbit(value) && best != 0 ? 0x80 : 0));
}
float e2m1_to_float(std::uint8_t code) {
    static const float t[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    return (code & 8) ? -t[code & 7] : t[code & 7];
}
std::uint8_t float_to_e2m1(float y) {
    const float a = std::fabs(y);
    std::uint8_t c = a > 5 ? 7 : a >= 3.5f ? 6 : a > 2.5f ? 5 : a >= 1.75f ? 4 : a > 1.25f ? 3 : a >= 0.75f ? 2
                     : a > 0.25f ? 1 : 0;
    return (c != 0 && y < 0) ? static_cast<std::uint8_t>(c | 8) : c;
}

void nvfp4_quantize(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales) {
    for (std::size_t b = 0; b < n / 16; ++b) {
        float amax = 1e-12f;
        for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[b * 16 + i]));
        float s = e4m3_to_float(float_to_e4m3(amax / 6.0f, Overflow::saturate));
        s = std::clamp(s, 0.001953125f, 448.0f);
        scales[b] = float_to_e4m3(s, Overflow::saturate);
        for (int i = 0; i < 16; i += 2) {
            const std::uint8_t lo = float_to_e2m1(x[b * 16 + i] / s), hi = float_to_e2m1(x[b * 16 + i + 1] / s);
            packed[b * 8 + i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
    }
}
void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float g, float* out) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t c = (i & 1) ? packed[i / 2] >> 4 : packed[i / 2] & 15;
        out[i] = e2m1_to_float(c) * e4m3_to_float(scales[i / 16]) * g;
    }
}
float nvfp4_quantize_weight(const float* x, std::size_t n, std::uint8_t* packed, std::uint8_t* scales) {
    float amax = 0;
    for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float g = amax > 0 ? amax / (448.0f * 6.0f) : 1.0f;
    for (std::size_t b = 0; b < n / 16; ++b) {
        float bmax = 0;
        for (int i = 0; i < 16; ++i) bmax = std::max(bmax, std::fabs(x[b * 16 + i]));
        scales[b] = float_to_e4m3(bmax / (6.0f * g), Overflow::saturate);
        const float s = e4m3_to_float(scales[b]) * g;
        for (int i = 0; i < 16; i += 2) {
            const std::uint8_t lo = s > 0 ? float_to_e2m1(x[b * 16 + i] / s) : 0;
            const std::uint8_t hi = s > 0 ? float_to_e2m1(x[b * 16 + i + 1] / s) : 0;
            packed[b * 8 + i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
    }
    return g;
}
void nvfp4_quantize_activation_row(const float* x, std::size_t n, float row_scale, std::uint8_t* packed,
                                   std::uint8_t* scales) {
    float buf[16];
    for (std::size_t b = 0; b < n / 16; ++b) {
        for (int i = 0; i < 16; ++i) buf[i] = x[b * 16 + i] * row_scale;
        nvfp4_quantize(buf, 16, packed + b * 8, scales + b);
    }
}
void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales) {
    for (std::size_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
        int e = amax > 0 ? static_cast<int>(std::floor(std::log2(amax))) - 8 : -127;
        e = std::clamp(e, -127, 127);
        scales[b] = static_cast<std::uint8_t>(e + 127);
        for (int i = 0; i < 32; ++i) values[b * 32 + i] = float_to_e4m3(std::ldexp(x[b * 32 + i], -e), Overflow::saturate);
    }
}

}  // namespace msa

namespace msa {
void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::ldexp(e4m3_to_float(values[i]), static_cast<int>(scales[i / 32]) - 127);
}
}  // namespace msa
