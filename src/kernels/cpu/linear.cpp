#include "kernels/cpu/linear.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace msa::cpu {
namespace {

// Output rows per chunk: at least ~64K multiply-adds so that tiny layers stay on one thread.
std::size_t output_grain(const WeightView& w, std::int64_t m) {
    const std::int64_t work_per_row = std::max<std::int64_t>(1, w.cols * m);
    return static_cast<std::size_t>(std::max<std::int64_t>(4, (65536 + work_per_row - 1) / work_per_row));
}

// Splits the output features over threads.
template <class Fn>
void split_outputs(const WeightView& w, std::int64_t m, Fn&& fn,
                   CallSite where = {__builtin_FILE(), __builtin_LINE()}) {
    const std::size_t grain = output_grain(w, m);
    parallel_for(
        static_cast<std::size_t>(w.rows), grain,
        [&](std::size_t b, std::size_t e) { fn(static_cast<std::int64_t>(b), static_cast<std::int64_t>(e)); }, where);
}

void run_float(const GemmJob& job) {
    if (!cpu_features().avx2) {
        gemm_float_scalar(job);
        return;
    }
    switch (job.w->format) {
        case LinearFormat::f32: gemm_f32_avx2(job); return;
        case LinearFormat::f16: gemm_f16_avx2(job); return;
        case LinearFormat::bf16:
            (cpu_features().avx512 ? gemm_bf16_avx512 : gemm_bf16_avx2)(job);
            return;
        case LinearFormat::mxfp8:
            (cpu_features().avx512 ? gemm_mxfp8_avx512 : gemm_mxfp8_avx2)(job);
            return;
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

std::vector<std::uint64_t> mxfp8_exponent_zero_blocks(const WeightView& w) {
    check_linear_weight(w, "mxfp8_exponent_zero_blocks");
    MSA_CHECK(w.format == LinearFormat::mxfp8, "mxfp8_exponent_zero_blocks needs an MXFP8 weight");
    const std::int64_t words = mxfp8_flag_words(w.cols);
    std::vector<std::uint64_t> flags(static_cast<std::size_t>(w.rows * words), 0);
    const auto* codes = static_cast<const std::uint8_t*>(w.data);
    parallel_for(static_cast<std::size_t>(w.rows), 16, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const std::uint8_t* row = codes + r * static_cast<std::size_t>(w.cols);
            for (std::int64_t b = 0; b < w.cols / 32; ++b) {
                bool any = false;
                for (int i = 0; i < 32; ++i) any |= (row[b * 32 + i] & 0x78) == 0;
                if (any) flags[r * static_cast<std::size_t>(words) + static_cast<std::size_t>(b / 64)] |= 1ull << (b % 64);
            }
        }
    });
    return flags;
}

void linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode, CallSite where) {
    if (m <= 0) return;
    if (mode == ActivationMode::int8 && w.format == LinearFormat::nvfp4) {
        Q8Rows xq;
        quantize_rows_q8(x, m, w.cols, xq);
        linear_q8(w, xq, y);
        return;
    }
    split_outputs(
        w, m,
        [&](std::int64_t n0, std::int64_t n1) {
            run_float(GemmJob{&w, x, m, y, w.rows, n0, n1});
        },
        where);
}

namespace {

void check_q8(const WeightView& w, const Q8Rows& xq) {
    MSA_CHECK(w.format == LinearFormat::nvfp4, "the integer GEMM path needs NVFP4 weights, got {}",
              linear_format_name(w.format));
    MSA_CHECK(xq.k == w.cols, "quantised activations have {} columns but the weight has {}", xq.k, w.cols);
}

void run_q8(const GemmJob& job, const Q8Rows& xq) {
    if (cpu_features().avx512 && job.w->cols % 128 == 0) {
        // Row pairs on AVX-512, a last odd row on AVX2: the same results either way.
        GemmJob pairs = job;
        pairs.n1 = job.n0 + (job.n1 - job.n0) / 2 * 2;
        gemm_nvfp4_q8_avx512(pairs, xq);
        if (pairs.n1 < job.n1) {
            GemmJob last = job;
            last.n0 = pairs.n1;
            gemm_nvfp4_q8_avx2(last, xq);
        }
    } else if (cpu_features().avx2 && job.w->cols % 32 == 0) {
        gemm_nvfp4_q8_avx2(job, xq);
    } else {
        gemm_nvfp4_q8_scalar(job, xq);
    }
}

}  // namespace

void linear_q8(const WeightView& w, const Q8Rows& xq, float* y) {
    check_q8(w, xq);
    if (xq.m <= 0) return;
    split_outputs(w, xq.m, [&](std::int64_t n0, std::int64_t n1) { run_q8(GemmJob{&w, nullptr, xq.m, y, w.rows, n0, n1}, xq); });
}

void linear_many(std::span<const LinearTask> tasks, CallSite where) {
    linear_many(tasks, nullptr, where);
}

void linear_many(std::span<const LinearTask> tasks, const std::function<void(std::size_t)>& on_task_done,
                 CallSite where) {
    // Int8-mode NVFP4 tasks quantise their activations first, as linear() does. Tasks with the same activations (the
    // same rows at the same address: gate and up, or q, k and v) share one quantisation, which is the same either
    // way; own[t] is the task whose quantisation task t uses.
    std::vector<Q8Rows> quantised(tasks.size());
    std::vector<std::size_t> own(tasks.size());
    struct Chunk {
        std::size_t task;
        std::int64_t n0, n1;
    };
    std::vector<Chunk> chunks;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        const LinearTask& task = tasks[t];
        own[t] = t;
        if (task.m <= 0) continue;
        if (task.xq != nullptr) {
            check_q8(*task.w, *task.xq);
        } else if (task.mode == ActivationMode::int8 && task.w->format == LinearFormat::nvfp4) {
            for (std::size_t u = 0; u < t; ++u) {
                if (quantised[u].m > 0 && tasks[u].x == task.x && tasks[u].m == task.m &&
                    tasks[u].w->cols == task.w->cols)
                    own[t] = u;
            }
            if (own[t] == t) quantize_rows_q8(task.x, task.m, task.w->cols, quantised[t]);
        }
        const auto grain = static_cast<std::int64_t>(output_grain(*task.w, task.m));
        for (std::int64_t n0 = 0; n0 < task.w->rows; n0 += grain) chunks.push_back({t, n0, std::min(task.w->rows, n0 + grain)});
    }
    // Chunks not yet finished per task, when someone waits for whole tasks.
    std::vector<std::atomic<std::int64_t>> chunks_left(on_task_done ? tasks.size() : 0);
    if (on_task_done) {
        for (const Chunk& c : chunks) chunks_left[c.task].fetch_add(1, std::memory_order_relaxed);
    }
    parallel_for(
        chunks.size(), 1,
        [&](std::size_t begin, std::size_t end) {
            for (std::size_t c = begin; c < end; ++c) {
                const LinearTask& task = tasks[chunks[c].task];
                const Q8Rows& xq = quantised[own[chunks[c].task]];
                const GemmJob job{task.w, task.x, task.m, task.y, task.w->rows, chunks[c].n0, chunks[c].n1};
                if (task.xq != nullptr) {
                    run_q8(job, *task.xq);
                } else if (xq.m > 0) {
                    run_q8(job, xq);
                } else {
                    run_float(job);
                }
                // The last chunk of a task to finish sees the others' rows (acquire-release on the count).
                if (on_task_done && chunks_left[chunks[c].task].fetch_sub(1, std::memory_order_acq_rel) == 1)
                    on_task_done(chunks[c].task);
            }
        },
        where);
}

void linear_rows(const WeightView& w, const float* x, std::int64_t m, float* y, std::int64_t n0, std::int64_t n1) {
    MSA_CHECK(0 <= n0 && n0 <= n1 && n1 <= w.rows, "linear_rows: rows [{}, {}) of a weight with {}", n0, n1, w.rows);
    if (m <= 0 || n0 == n1) return;
    run_float(GemmJob{&w, x, m, y, w.rows, n0, n1});
}

}  // namespace msa::cpu
