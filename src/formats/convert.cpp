// Bulk conversions: the AVX2 path when the CPU has it, else the scalar reference functions element by element.
#include "formats/convert.h"

#include "core/cpu_features.h"
#include "formats/bulk_avx2.h"
#include "formats/scalar_formats.h"

namespace msa {
namespace {

template <typename In, typename Out, typename Convert>
void convert_scalar(const In* in, Out* out, std::size_t n, Convert convert) {
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = convert(in[i]);
    }
}

}  // namespace

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::bf16_to_float(in, out, n);
    convert_scalar(in, out, n, [](std::uint16_t b) { return bf16_to_float(b); });
}

void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::float_to_bf16(in, out, n);
    convert_scalar(in, out, n, [](float x) { return float_to_bf16(x); });
}

void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::fp16_to_float(in, out, n);
    convert_scalar(in, out, n, [](std::uint16_t h) { return fp16_to_float(h); });
}

void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::float_to_fp16(in, out, n);
    convert_scalar(in, out, n, [](float x) { return float_to_fp16(x, Overflow::ieee); });
}

void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::e4m3_to_float(in, out, n);
    convert_scalar(in, out, n, [](std::uint8_t c) { return e4m3_to_float(c); });
}

void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::float_to_e4m3(in, out, n);
    convert_scalar(in, out, n, [](float x) { return float_to_e4m3(x, Overflow::saturate); });
}

void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::e5m2_to_float(in, out, n);
    convert_scalar(in, out, n, [](std::uint8_t c) { return e5m2_to_float(c); });
}

void float_to_e5m2(const float* in, std::uint8_t* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::float_to_e5m2(in, out, n);
    convert_scalar(in, out, n, [](float x) { return float_to_e5m2(x, Overflow::saturate); });
}

void bf16_to_e4m3(const std::uint16_t* in, std::uint8_t* out, std::size_t n) {
    if (cpu_features().avx2) return avx2::bf16_to_e4m3(in, out, n);
    convert_scalar(in, out, n, [](std::uint16_t b) { return float_to_e4m3(bf16_to_float(b), Overflow::saturate); });
}

}  // namespace msa
