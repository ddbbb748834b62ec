// Bulk conversions with AVX2/F16C fast paths chosen at run time (core/cpu_features.h). Each equals the scalar
// functions of scalar_formats.h bit for bit, for every input (MSA_FORCE_SCALAR=1 selects the scalar loops).
// `in` and `out` must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msa {

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n);
void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n);  // Overflow::ieee (F16C's behaviour)
void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n);
void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n);  // saturating
void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n);
void float_to_e5m2(const float* in, std::uint8_t* out, std::size_t n);  // saturating
// float_to_e4m3(bf16_to_float(x)), saturating: the plain BF16 -> E4M3 cast of Q in the Q8KV4 path (msa.md 5).
void bf16_to_e4m3(const std::uint16_t* in, std::uint8_t* out, std::size_t n);

}  // namespace msa
