// Bulk conversions with AVX2/F16C fast paths chosen at run time (core/cpu_features.h). Each equals the scalar
// functions of scalar_formats.h bit for bit, for every input.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msa {

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n);
void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n);
void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n);
void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n);  // saturating
void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n);

}  // namespace msa
