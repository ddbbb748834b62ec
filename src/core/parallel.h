// Data-parallel loops for CPU kernels, run by one persistent thread pool (parallel.cpp says why not OpenMP regions).
// Never call from HTTP threads: kernels run on the engine thread only.
#pragma once

#include <cstddef>
#include <functional>

namespace msa {

// Number of worker threads kernels use (default: MSA_NUM_THREADS, else OMP_NUM_THREADS, else all cores).
int num_threads();
void set_num_threads(int n);

// Calls fn(begin, end) over [0, n) split into contiguous ranges of at least `grain` items, in parallel: up to four
// ranges per thread, claimed by the threads as they come. The split depends only on n, grain and num_threads().
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

}  // namespace msa
