// AVX2 versions of the bulk functions of convert.h, nvfp4.h and mxfp8.h, defined in the *_avx2.cpp files of this
// module. Internal: only the dispatching functions call them, after checking cpu_features().avx2. Arguments are
// those of the public functions, already validated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msa::avx2 {

void bf16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_bf16(const float* in, std::uint16_t* out, std::size_t n);
void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n);
void e4m3_to_float(const std::uint8_t* in, float* out, std::size_t n);
void float_to_e4m3(const float* in, std::uint8_t* out, std::size_t n);
void e5m2_to_float(const std::uint8_t* in, float* out, std::size_t n);
void float_to_e5m2(const float* in, std::uint8_t* out, std::size_t n);
void bf16_to_e4m3(const std::uint16_t* in, std::uint8_t* out, std::size_t n);

// NVFP4 KV-insert quantiser of x[i] * multiplier (multiplier 1 is the plain quantiser: x * 1 == x exactly).
void nvfp4_quantize(const float* x, std::size_t n, float multiplier, std::uint8_t* packed, std::uint8_t* scales);
void nvfp4_dequantize(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n, float global_scale,
                      float* out);
void nvfp4_dequantize_to_e4m3(const std::uint8_t* packed, const std::uint8_t* scales, std::size_t n,
                              std::uint8_t* out_e4m3);

void mxfp8_quantize(const float* x, std::size_t n, std::uint8_t* values, std::uint8_t* scales);
void mxfp8_dequantize(const std::uint8_t* values, const std::uint8_t* scales, std::size_t n, float* out);

}  // namespace msa::avx2
