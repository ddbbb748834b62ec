// Activations quantised for the integer NVFP4 GEMM (gemm_nvfp4_q8*): int8 values in groups of 16 that line up with
// the weights' NVFP4 blocks, one float scale per group, and an optional per-row output multiplier.
//
// The int8 values are stored in the order in which 16 bytes (32 values) of NVFP4 weights unpack into one AVX2
// register, low nibbles (even elements) in the lower half and high nibbles (odd elements) in the upper half:
// per chunk of 32 values x0..x31 the order is x0, x2, ..., x30, x1, x3, ..., x31. A final chunk of only 16 values
// (row length 16 mod 32) is stored x0, x2, ..., x14, x1, ..., x15. So the kernel needs no shuffle of the
// activations. q8_index() maps an element to its slot.
#pragma once

#include <cstdint>
#include <vector>

namespace msa::cpu {

struct Q8Rows {
    std::int64_t m = 0;
    std::int64_t k = 0;
    std::vector<std::int8_t> q;    // [m][k], group-deinterleaved as above
    std::vector<float> d;          // [m][k/16]: value of one int8 unit in that group
    std::vector<float> row_mul;    // [m]: multiplies each output row (1 unless the quantiser scaled the row)
};

// Fast mode: per group d = amax / 127, q = round(x / d). Not exact: the relative error of a dot product is about
// 2^-8 / sqrt(group count) of its magnitude. k must be a multiple of 16.
void quantize_rows_q8(const float* x, std::int64_t m, std::int64_t k, Q8Rows& out);

// M3.1 W4A4 expert activations (model.md section 4): each row is multiplied by its row scale S and quantised to
// NVFP4 with the KV-insert rule (formats.md section 3), then held as q = 2 * e2m1 with d = e4m3_scale / 2, and
// row_mul = 1 / S. FC1 inputs use S = 2688 / row_amax (an all-zero row stays zero), FC2 inputs S = 16.
// Products of these integers with NVFP4 weights are exact, so the W4A4 GEMM is exact up to FP32 accumulation.
enum class W4a4Input { fc1, fc2 };
void quantize_rows_w4a4(const float* x, std::int64_t m, std::int64_t k, W4a4Input input, Q8Rows& out);

// Slot of element j within a row of length k (see the order above).
inline std::int64_t q8_index(std::int64_t j, std::int64_t k) {
    const std::int64_t chunk = j / 32 * 32;
    const std::int64_t o = j - chunk;
    const std::int64_t width = (k - chunk >= 32) ? 32 : 16;
    return chunk + (o & 1) * (width / 2) + o / 2;
}

// Dequantised value of element j of row i (tests and the scalar path).
float q8_value(const Q8Rows& rows, std::int64_t i, std::int64_t j);

}  // namespace msa::cpu
