// What every benchmark records next to its figures (contributing.md: figure, value, unit, date, machine, commit),
// and the CPU-time clocks they time with: on a shared machine wall time also counts the time other jobs hold the
// cores, CPU time does not.
#pragma once

#include "core/cpu_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <time.h>
#include <unistd.h>

namespace msa::bench {

inline double cpu_clock_us(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}
inline double thread_cpu_us() {
    return cpu_clock_us(CLOCK_THREAD_CPUTIME_ID);
}
inline double process_cpu_us() {
    return cpu_clock_us(CLOCK_PROCESS_CPUTIME_ID);
}

// The command's standard output without trailing newlines and spaces ("" when it cannot run).
inline std::string run_command(const char* cmd) {
    std::string out;
    if (FILE* f = popen(cmd, "r")) {
        char buf[256];
        while (fgets(buf, sizeof buf, f)) out += buf;
        pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

// The CPU's model name from /proc/cpuinfo.
inline std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

// The kernels' instruction set in this process: "avx512", "avx2" (also on AVX-512 CPUs run with MSA_NO_AVX512=1) or
// "scalar" (MSA_FORCE_SCALAR=1, or no AVX2).
inline std::string simd_kernels() {
    const CpuFeatures& f = cpu_features();
    return f.avx512 ? "avx512" : (f.avx2 ? "avx2" : "scalar");
}

// "<CPU model name>, <n> hardware threads".
inline std::string machine_description() {
    return fmt::format("{}, {} hardware threads", cpu_model_name(), std::thread::hardware_concurrency());
}

// The measured commit; "-dirty" when tracked files other than the results differ from it.
inline std::string measured_commit() {
    std::string commit = run_command("git rev-parse --short=12 HEAD 2>/dev/null");
    if (commit.empty()) commit = "unknown";
    if (!run_command("git status --porcelain --untracked-files=no -- . ':(exclude)bench/results' 2>/dev/null")
             .empty()) {
        commit += "-dirty";
    }
    return commit;
}

// Size of the last-level cache in bytes (0 when the C library does not know it).
inline std::size_t llc_bytes() {
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::size_t>(v) : 0;
}

// Bytes of data a benchmark must cycle through to measure memory rather than cache: 256 MiB, or 4x the last-level
// cache when that is larger. Server CPUs have L3 caches of 300-500 MiB (the 16-CPU Xeon host of the GPU machine:
// 300 MiB; this project's 2-CPU EPYC VM: 508 MiB), which held most of a 256 MiB buffer.
inline std::size_t memory_buffer_bytes() {
    return std::max<std::size_t>(std::size_t{256} << 20, 4 * llc_bytes());
}

}  // namespace msa::bench
