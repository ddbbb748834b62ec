// A linear layer's weight W [rows = N outputs][cols = K inputs] as stored in a checkpoint, described without owning
// it (the bytes usually live in a memory-mapped safetensors file, or in a backend's device memory).
// The GEMM kernels read these formats directly; nothing is converted at load time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace msa {

enum class LinearFormat {
    f32,    // float[N][K]
    f16,    // IEEE half [N][K]
    bf16,   // bf16 [N][K]
    mxfp8,  // E4M3 [N][K] + UE8M0 scales [N][K/32]: W = e4m3 * 2^(e-127)
    nvfp4,  // E2M1 pairs [N][K/2] (low nibble = even column) + E4M3 scales [N][K/16] + global: W = e2m1*s*global
};

std::string_view linear_format_name(LinearFormat format);

struct WeightView {
    LinearFormat format = LinearFormat::f32;
    std::int64_t rows = 0;  // N (output features)
    std::int64_t cols = 0;  // K (input features, the reduction dimension)
    const void* data = nullptr;
    const std::uint8_t* scales = nullptr;  // mxfp8 / nvfp4 block scales, row-major [N][K / block]
    float global_scale = 1.0f;             // nvfp4 `weight_scale_2`
    // mxfp8 only, optional: one bit per 32-weight block, set when the block holds a code with exponent field 0 (an
    // E4M3 subnormal or a zero), ceil(cols / 2048) words per row (bit b % 64 of word b / 64 is block b). The CPU
    // backend computes it when it adopts a weight (cpu::mxfp8_exponent_zero_blocks); without it the CPU GEMV looks at
    // the codes itself.
    const std::uint64_t* mxfp8_exponent_zero_blocks = nullptr;

    bool empty() const { return data == nullptr; }
    // Bytes of `data` plus `scales` (what a GEMV reads once).
    std::size_t bytes() const;
};

}  // namespace msa
