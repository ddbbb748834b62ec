// Linear layers on the CPU: y[m][N] = x[m][K] * W^T for every weight format, multi-threaded over output features.
//
// Numerics (what each mode promises):
//  - ActivationMode::exact: FP32 activations times the exactly dequantised weight (BF16/F16/F32 as stored,
//    MXFP8 e4m3 * 2^(e-127), NVFP4 e2m1 * scale, with NVFP4's global scale applied to the finished sum), FP32 FMA
//    accumulation. Differs from a float64 reference only by FP32 rounding (relative ~1e-7 * sqrt(K) worst case),
//    which is what the 1e-4 logit parity of the exact mode needs.
//  - ActivationMode::int8: NVFP4 weights take the integer path with activations quantised to int8 per 16 values
//    (quantize_rows_q8); a dot product then carries a relative error of order 2^-8 of its magnitude. Other formats
//    ignore this mode and run exactly. This is the fast serving mode, not for parity.
//  - M3.1 W4A4 experts: the caller quantises with quantize_rows_w4a4 and calls linear_q8; that path is exact up to
//    FP32 accumulation because the 4-bit by 4-bit products are integers.
// In every mode each output row depends only on its own input row (results never depend on batch composition).
#pragma once

#include "core/parallel.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/kernel_types.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace msa::cpu {

using msa::ActivationMode;

// x: [m][w.cols] row-major; y: [m][w.rows] row-major (overwritten).
// `where` (the caller) names the parallel loop in the thread pool's profile (core/parallel.h).
void linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode = ActivationMode::exact,
            CallSite where = {__builtin_FILE(), __builtin_LINE()});

// y = xq * W^T for NVFP4 weights with pre-quantised activations (lets two weights share one quantisation).
void linear_q8(const WeightView& w, const Q8Rows& xq, float* y);

// One layer of a linear_many() call: y = x * W^T with float activations x and `mode` as in linear(), or, when xq is
// set, NVFP4 weights against pre-quantised activations as in linear_q8() (x and mode are then unused).
struct LinearTask {
    const WeightView* w = nullptr;
    const float* x = nullptr;
    const Q8Rows* xq = nullptr;
    std::int64_t m = 0;
    float* y = nullptr;
    ActivationMode mode = ActivationMode::exact;
};

// Several independent layers in one parallel region, their output rows split over the threads together (decode runs
// many small GEMVs, e.g. every routed expert of a token: one fork/join instead of one per layer). Results are those
// of linear() / linear_q8() on each task, bit for bit.
void linear_many(std::span<const LinearTask> tasks, CallSite where = {__builtin_FILE(), __builtin_LINE()});

// linear_many() that also calls on_task_done(t) once per task t with m > 0, inside the parallel region, on the thread
// that finishes the task's last rows (after every row of y is written; the other threads meanwhile go on with the
// remaining tasks): work that needs only that task's output, such as an expert's swigluoai, then overlaps the other
// GEMVs instead of running serially after the region. Tasks' results are unchanged.
void linear_many(std::span<const LinearTask> tasks, const std::function<void(std::size_t)>& on_task_done,
                 CallSite where = {__builtin_FILE(), __builtin_LINE()});

// Output rows [n0, n1) of linear(w, x, m, y, ActivationMode::exact) on the calling thread only (no parallel loop),
// the same values: for a small layer that shares a parallel region with other work.
void linear_rows(const WeightView& w, const float* x, std::int64_t m, float* y, std::int64_t n0, std::int64_t n1);

// The bitmap of WeightView::mxfp8_exponent_zero_blocks for an MXFP8 weight: per row mxfp8_flag_words(cols) words,
// bit b % 64 of word b / 64 set when block b (columns 32b..32b+31) has a code with exponent field 0 (an E4M3
// subnormal, +-0). The small-batch GEMV decodes such blocks another way (a float subnormal in its multiply is slow
// on x86); real quantised weights hardly ever have them (values below 2^-14 of their block's largest). Threaded.
inline std::int64_t mxfp8_flag_words(std::int64_t cols) { return (cols / 32 + 63) / 64; }
std::vector<std::uint64_t> mxfp8_exponent_zero_blocks(const WeightView& w);

// Checks that a weight view is usable by linear() (shape multiples the format needs, non-null pointers); throws
// msa::Error naming `what` otherwise.
void check_linear_weight(const WeightView& w, const char* what);

}  // namespace msa::cpu
