// Data-parallel loops for CPU kernels, run by one persistent thread pool (parallel.cpp says why not OpenMP regions).
// Never call from HTTP threads: kernels run on the engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace msa {

// Number of worker threads kernels use (default: MSA_NUM_THREADS, else OMP_NUM_THREADS, else all cores).
int num_threads();
void set_num_threads(int n);

// Where a call comes from, for the profile below. As a default argument, `CallSite where = {__builtin_FILE(),
// __builtin_LINE()}` takes the caller's file and line (GCC and clang): what std::source_location::current() gives,
// which clang 14 cannot provide with libstdc++ 12 (the fuzz build).
struct CallSite {
    const char* file = "";
    int line_number = 0;
    const char* file_name() const { return file; }
    int line() const { return line_number; }
};

// Calls fn(begin, end) over [0, n) split into contiguous ranges of at least `grain` items, in parallel: up to four
// ranges per thread, claimed by the threads as they come. The split depends only on n, grain and num_threads().
// `where` names the call site for the profile below.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn,
                  CallSite where = {__builtin_FILE(), __builtin_LINE()});

// How long an idle worker spins (pause loop) waiting for the next loop before it sleeps on a condition variable, in
// microseconds (default: MSA_SPIN_US, else 30). A worker that slept costs the next loop a futex wake-up; one that
// spins holds its core. Decode runs many short loops with short serial stretches between them.
int worker_spin_us();
void set_worker_spin_us(int us);

// Whether each pool thread is bound to its own CPU (MSA_PIN_THREADS=1; default off): a thread that starts loops (the
// model loader's, then the engine's) to the first CPU the process may use, worker i to the (i + 1)-th (wrapping
// around).
bool threads_pinned();

// Profile of the loops the engine thread starts, for benchmarks. Nested loops (inside another loop's ranges) are not
// counted; loops of one range or at one thread run inline and are counted but not timed.
struct ParallelSiteStats {
    std::string site;  // file:line of the parallel_for call
    std::uint64_t loops = 0;
    double seconds = 0.0;  // wall time from the call to its return
    // Wall time between the end of the previous timed loop and this call: the serial work (and the loops run
    // inline) that leads up to this site. Not counted for the first loop after profiling was switched on.
    double seconds_before = 0.0;
};
struct ParallelStats {
    std::uint64_t loops = 0;               // top-level loops while profiling is on, also those run inline
    std::uint64_t worker_sleeps = 0;       // times a worker gave up spinning and slept
    double loop_seconds = 0.0;             // wall time inside loops run by the pool, while profiling is on
    std::vector<ParallelSiteStats> sites;  // while profiling is on; by call site, in order of first use
};
void set_parallel_profiling(bool on);  // per-site timing (two clock reads per loop)
ParallelStats parallel_stats();        // since the last reset
void reset_parallel_stats();

}  // namespace msa
