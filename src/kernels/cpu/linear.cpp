#include "kernels/cpu/linear.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm.h"

#include <algorithm>

namespace msa::cpu {
namespace {

// Splits the output features over threads; a chunk gets at least ~64K multiply-adds so that tiny layers stay on
// one thread.
template <class Fn>
void split_outputs(const WeightView& w, std::int64_t m, Fn&& fn) {
    const std::int64_t work_per_row = std::max<std::int64_t>(1, w.cols * m);
    const std::size_t grain = static_cast<std::size_t>(std::max<std::int64_t>(4, (65536 + work_per_row - 1) / work_per_row));
    parallel_for(static_cast<std::size_t>(w.rows), grain, [&](std::size_t b, std::size_t e) {
        fn(static_cast<std::int64_t>(b), static_cast<std::int64_t>(e));
    });
}

void run_float(const GemmJob& job) {
    if (!cpu_features().avx2) {
        gemm_float_scalar(job);
        return;
    }
    switch (job.w->format) {
        case LinearFormat::f32: gemm_f32_avx2(job); return;
        case LinearFormat::f16: gemm_f16_avx2(job); return;
        case LinearFormat::bf16: gemm_bf16_avx2(job); return;
        case LinearFormat::mxfp8: gemm_mxfp8_avx2(job); return;
        case LinearFormat::nvfp4: gemm_nvfp4_avx2(job); return;
    }
}

}  // namespace

void check_linear_weight(const WeightView& w, const char* what) {
    MSA_CHECK(w.data != nullptr && w.rows > 0 && w.cols > 0, "weight '{}' is empty", what);
    switch (w.format) {
        case LinearFormat::mxfp8:
            MSA_CHECK(w.cols % 32 == 0 && w.scales != nullptr,
                      "MXFP8 weight '{}' needs scales and an input size divisible by 32 (got {})", what, w.cols);
            break;
        case LinearFormat::nvfp4:
            MSA_CHECK(w.cols % 16 == 0 && w.scales != nullptr,
                      "NVFP4 weight '{}' needs scales and an input size divisible by 16 (got {})", what, w.cols);
            break;
        default: break;
    }
}

void linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode) {
    if (m <= 0) return;
    if (mode == ActivationMode::int8 && w.format == LinearFormat::nvfp4) {
        Q8Rows xq;
        quantize_rows_q8(x, m, w.cols, xq);
        linear_q8(w, xq, y);
        return;
    }
    split_outputs(w, m, [&](std::int64_t n0, std::int64_t n1) {
        run_float(GemmJob{&w, x, m, y, w.rows, n0, n1});
    });
}

void linear_q8(const WeightView& w, const Q8Rows& xq, float* y) {
    MSA_CHECK(w.format == LinearFormat::nvfp4, "the integer GEMM path needs NVFP4 weights, got {}",
              linear_format_name(w.format));
    MSA_CHECK(xq.k == w.cols, "quantised activations have {} columns but the weight has {}", xq.k, w.cols);
    if (xq.m <= 0) return;
    const bool simd = cpu_features().avx2 && w.cols % 32 == 0;
    split_outputs(w, xq.m, [&](std::int64_t n0, std::int64_t n1) {
        const GemmJob job{&w, nullptr, xq.m, y, w.rows, n0, n1};
        if (simd) {
            gemm_nvfp4_q8_avx2(job, xq);
        } else {
            gemm_nvfp4_q8_scalar(job, xq);
        }
    });
}

}  // namespace msa::cpu
