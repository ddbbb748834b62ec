// Activations quantised for the integer NVFP4 GEMM (gemm_nvfp4_q8*): int8 values in groups of 16 that line up with
// the weights' NVFP4 blocks, one float scale per group, and an optional per-row output multiplier.
//
// Within each group of 16 the int8 values are stored evens first: x0, x2, ..., x14, x1, x3, ..., x15. That is the
// order in which a 16-byte load of NVFP4 weights unpacks (low nibbles hold even elements, high nibbles odd ones),
// so the kernel needs no shuffle of the activations.
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

// Dequantised value of element j of row i (tests and the scalar path).
float q8_value(const Q8Rows& rows, std::int64_t i, std::int64_t j);

}  // namespace msa::cpu
