// One GEMV (a batch of one activation row) of one weight format, repeated: the kernel's GB/s with its weights in
// cache or streamed from memory, by wall and by CPU time, and the activation quantiser's time for W4A4. Small and
// deterministic enough to run under callgrind (bench/gemv_instructions.sh counts instructions per weight byte with
// it), which is how kernel versions are compared on a shared machine.
//
//   msa_gemv_bench [--format nvfp4_w4a4|nvfp4_int8|nvfp4_exact|mxfp8|bf16] [--rows N] [--cols K] [--calls C]
//                  [--reps R] [--threads T] [--stream] [--gap-us G] [--group N] [--out FILE] [--commit SHA]
//                  [--label TEXT]
//
// --stream: round-robin over copies of the matrix totalling >= memory_buffer_bytes() (256 MiB or 4x the last-level
// cache: weights from memory); otherwise one matrix (in cache when it fits). GB/s counts the weight bytes (codes +
// scales) per call. --out appends its records to the JSON array already in FILE (or starts one). --gap-us G: the
// calling thread spins G microseconds after each call (the serial work between a decode step's parallel regions) and
// only the calls are timed (wall): with several threads, the difference to --gap-us 0 is what a region costs when the
// pool's workers had to wait in between. --group N: each call is one linear_many() over N different matrices of this
// shape (W4A4: with one shared quantised row), as a MoE layer's decode runs its experts' gate and up products; bytes
// per call count all N.
#include "common/bench_host.h"
#include "core/parallel.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/random_weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace msa::bench {
namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run(int argc, char** argv) {
    std::string format = "nvfp4_w4a4", out, commit, label;
    std::int64_t rows = 512, cols = 4096;
    int calls = 200, reps = 9, threads = 1, group = 1;
    double gap_us = 0;
    bool stream = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
            return argv[++i];
        };
        if (a == "--format") format = next();
        else if (a == "--rows") rows = std::stoll(next());
        else if (a == "--cols") cols = std::stoll(next());
        else if (a == "--calls") calls = std::stoi(next());
        else if (a == "--reps") reps = std::stoi(next());
        else if (a == "--threads") threads = std::stoi(next());
        else if (a == "--stream") stream = true;
        else if (a == "--gap-us") gap_us = std::stod(next());
        else if (a == "--group")
            group = std::stoi(next());
        else if (a == "--out") out = next();
        else if (a == "--commit") commit = next();
        else if (a == "--label") label = next();
        else throw std::runtime_error("unknown argument " + a);
    }
    set_num_threads(threads);
    LinearFormat f = LinearFormat::nvfp4;
    int mode = 0;  // 0 exact, 1 int8, 2 w4a4
    if (format == "bf16") f = LinearFormat::bf16;
    else if (format == "mxfp8") f = LinearFormat::mxfp8;
    else if (format == "nvfp4_int8") mode = 1;
    else if (format == "nvfp4_w4a4") mode = 2;
    else if (format != "nvfp4_exact") throw std::runtime_error("unknown format " + format);

    std::mt19937 wrng(1);
    std::vector<OwnedLinear> ms;
    if (group < 1) throw std::runtime_error("--group needs at least 1");
    ms.push_back(random_linear(f, rows, cols, wrng));
    while (ms.size() < static_cast<std::size_t>(group)) ms.push_back(random_linear(f, rows, cols, wrng, &ms.front()));
    const std::size_t bytes = ms[0].view.bytes() * static_cast<std::size_t>(group);
    while (stream && ms.size() * ms[0].view.bytes() < memory_buffer_bytes())
        ms.push_back(random_linear(f, rows, cols, wrng, &ms.front()));
    const std::size_t sets = ms.size() / static_cast<std::size_t>(group);
    std::vector<float> x(static_cast<std::size_t>(cols)), y(static_cast<std::size_t>(rows * group));
    std::mt19937 rng(2);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    cpu::Q8Rows xq;
    if (mode == 2) cpu::quantize_rows_w4a4(x.data(), 1, cols, cpu::W4a4Input::fc1, xq);
    auto call = [&](std::size_t set) {
        if (group > 1) {
            std::vector<cpu::LinearTask> tasks;
            for (int g = 0; g < group; ++g)
                tasks.push_back({&ms[set * static_cast<std::size_t>(group) + static_cast<std::size_t>(g)].view,
                                 mode == 2 ? nullptr : x.data(), mode == 2 ? &xq : nullptr, 1, y.data() + g * rows,
                                 mode == 1 ? ActivationMode::int8 : ActivationMode::exact});
            cpu::linear_many(tasks);
            return;
        }
        const OwnedLinear& m = ms[set];
        if (mode == 2) {
            cpu::linear_q8(m.view, xq, y.data());
        } else {
            cpu::linear(m.view, x.data(), 1, y.data(), mode == 1 ? ActivationMode::int8 : ActivationMode::exact);
        }
    };
    // Median over reps of `calls` calls, by wall and by process CPU time.
    std::vector<double> wall, cpu;
    for (int r = 0; r <= reps; ++r) {
        const double t0 = now_s(), c0 = process_cpu_us();
        double in_calls = 0;
        for (int c = 0; c < calls; ++c) {
            const double s0 = now_s();
            call(static_cast<std::size_t>(c) % sets);
            const double s1 = now_s();
            in_calls += s1 - s0;
            while (gap_us > 0 && now_s() - s1 < gap_us * 1e-6) {
            }
        }
        if (r == 0) continue;  // warm-up
        wall.push_back((gap_us > 0 ? in_calls : now_s() - t0) / calls);
        cpu.push_back((process_cpu_us() - c0) * 1e-6 / calls);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    const double t_wall = wall[wall.size() / 2], t_cpu = cpu[cpu.size() / 2];
    // The W4A4 activation quantiser (one row of `cols`), which runs once per token before the expert GEMVs.
    double quant_us = 0;
    if (mode == 2) {
        const double c0 = process_cpu_us();
        const int qcalls = 200;
        for (int c = 0; c < qcalls; ++c) cpu::quantize_rows_w4a4(x.data(), 1, cols, cpu::W4a4Input::fc1, xq);
        quant_us = (process_cpu_us() - c0) / qcalls;
    }
    const std::string figure = "gemv_" + format + "_m1" + (stream ? "" : "_in_cache") + "_" + std::to_string(rows) +
                               "x" + std::to_string(cols) + (group > 1 ? "_group" + std::to_string(group) : "") +
                               (gap_us > 0 ? "_gap" + std::to_string(static_cast<int>(gap_us)) + "us" : "");
    std::printf("%s: %.2f GB/s wall (%.2f us per call), %.2f GB/s per CPU-second (%zu bytes per call, %d threads)%s\n",
                figure.c_str(), static_cast<double>(bytes) / t_wall / 1e9, t_wall * 1e6,
                static_cast<double>(bytes) / t_cpu / 1e9, bytes, threads,
                mode == 2 ? (", quantiser " + std::to_string(quant_us) + " us per row").c_str() : "");
    if (!out.empty()) {
        nlohmann::json recs = nlohmann::json::array();
        const std::string date = run_command("date -u +%F");
        auto add = [&](const std::string& fig, double value, const std::string& unit) {
            recs.push_back({{"figure", fig},
                            {"value", value},
                            {"unit", unit},
                            {"date", date},
                            {"machine", machine_description()},
                            {"commit", commit.empty() ? measured_commit() : commit},
                            {"threads", threads},
                            {"simd", simd_kernels()},
                            {"rows", rows},
                            {"cols", cols},
                            {"bytes_per_call", bytes},
                            {"calls", calls},
                            {"reps", reps},
                            {"label", label},
                            {"group", group},
                            {"weight_bytes_cycled", ms.size() * ms[0].view.bytes()},
                            {"load_average", run_command("cut -d' ' -f1-3 /proc/loadavg")}});
        };
        add(figure + "_wall", static_cast<double>(bytes) / t_wall / 1e9, "GB/s");
        add(figure + "_us_per_call", t_wall * 1e6, "us (wall)");
        add(figure + "_cputime", static_cast<double>(bytes) / t_cpu / 1e9, "GB/s per CPU-second");
        if (mode == 2) add("w4a4_activation_quantiser_" + std::to_string(cols), quant_us, "us per row (CPU time)");
        // Appends to the array already in `out` (one file per suite run collects many cases).
        nlohmann::json all = nlohmann::json::array();
        if (std::ifstream in(out); in) {
            all = nlohmann::json::parse(in, nullptr, false);
            if (!all.is_array()) all = nlohmann::json::array();
        }
        for (auto& r : recs) all.push_back(std::move(r));
        std::ofstream(out) << all.dump(1) << "\n";
    }
    return 0;
}

}  // namespace
}  // namespace msa::bench

int main(int argc, char** argv) {
    try {
        return msa::bench::run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "msa_gemv_bench: %s\n", e.what());
        return 1;
    }
}
