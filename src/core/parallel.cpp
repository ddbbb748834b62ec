#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

namespace msa {
namespace {

int initial_threads() {
    for (const char* var : {"MSA_NUM_THREADS", "OMP_NUM_THREADS"}) {
        if (const char* v = std::getenv(var)) {
            const int n = std::atoi(v);
            if (n > 0) return n;
        }
    }
    return std::max(1, omp_get_num_procs());
}

int& thread_count() {
    static int n = initial_threads();
    return n;
}

}  // namespace

int num_threads() { return thread_count(); }

void set_num_threads(int n) { thread_count() = std::max(1, n); }

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
    if (n == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_chunks = (n + grain - 1) / grain;
    const int threads = static_cast<int>(std::min<std::size_t>(max_chunks, static_cast<std::size_t>(num_threads())));
    if (threads <= 1) {
        fn(0, n);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
        const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t begin = n * t / nt;
        const std::size_t end = n * (t + 1) / nt;
        if (begin < end) fn(begin, end);
    }
}

}  // namespace msa
