// Activations quantised for the integer NVFP4 GEMM (gemm_nvfp4_q8*): int8 values in groups of 16 that line up with
// the weights' NVFP4 blocks, one float scale per group, and an optional per-row output multiplier.
//
// The int8 values are stored in the order in which the AVX2 kernel unpacks 32 bytes (64 values, 4 blocks) of NVFP4
// weights: one register of the low nibbles (even elements) and one of the high nibbles (odd elements), each holding
// the 4 blocks one after the other. Per chunk of 64 values x0..x63 the order is: for each block b = 0..3 the 8 even
// elements x[16b], x[16b+2], ..., x[16b+14], then for each block the 8 odd elements x[16b+1], ..., x[16b+15]. A final
// chunk of w = 16, 32 or 48 values (row length not a multiple of 64) is stored the same way with w/16 blocks. So
// the kernel needs no shuffle of the activations. q8_index() maps an element to its slot.
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
    const std::int64_t chunk = j / 64 * 64;
    const std::int64_t o = j - chunk;
    const std::int64_t width = (k - chunk >= 64) ? 64 : k - chunk;
    return chunk + (o & 1) * (width / 2) + (o / 16) * 8 + (o % 16) / 2;
}

// The 8 slots of group g (elements 16g..16g+15) of a row of length k: even elements 16g + 2e go to lo + e, odd
// elements 16g + 2e + 1 to hi + e (the same mapping as q8_index).
struct Q8GroupSlots {
    std::int64_t lo, hi;
};
inline Q8GroupSlots q8_group_slots(std::int64_t g, std::int64_t k) {
    const std::int64_t chunk = g / 4 * 64;
    const std::int64_t width = (k - chunk >= 64) ? 64 : k - chunk;
    const std::int64_t lo = chunk + (g % 4) * 8;
    return {lo, lo + width / 2};
}

// Dequantised value of element j of row i (tests and the scalar path).
float q8_value(const Q8Rows& rows, std::int64_t i, std::int64_t j);

}  // namespace msa::cpu
