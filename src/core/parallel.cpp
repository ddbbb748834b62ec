#include "core/parallel.h"

#include "core/env_flag.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

// A persistent pool instead of one OpenMP region per call. Decode runs dozens of short loops per token; with
// OpenMP each ends in a barrier that waits for every thread, so one descheduled thread (a busy machine) stalls
// the step, and spinning partners take the CPU it needs. Here the caller and the workers claim the ranges of a
// loop from one shared counter: the caller runs every range nobody has claimed yet, and waits only for ranges
// that a running thread has already started. A worker that wakes late finds nothing left and goes back to sleep.
namespace msa {
namespace {

int available_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int initial_threads() {
    for (const char* var : {"MSA_NUM_THREADS", "OMP_NUM_THREADS"}) {
        if (const char* v = std::getenv(var)) {
            const int n = std::atoi(v);
            if (n > 0) return n;
        }
    }
    return available_cpus();
}

int initial_spin_us() {
    if (const char* v = std::getenv("MSA_SPIN_US")) {
        const int n = std::atoi(v);
        if (n >= 0) return n;
    }
    return 30;  // about the 512 pauses of earlier versions on an Intel core
}

std::atomic<int>& spin_us() {
    static std::atomic<int> us{initial_spin_us()};
    return us;
}

std::atomic<int>& thread_count() {
    static std::atomic<int> n{initial_threads()};
    return n;
}

// True on a pool worker, and on a caller while it runs a loop: nested loops then run serially in that thread.
thread_local bool in_parallel_loop = false;

using RangeFn = std::function<void(std::size_t, std::size_t)>;

class Pool {
public:
    // Runs fn over n items split into `ranges` contiguous ranges, with up to `helpers` workers helping.
    void run(std::size_t n, std::uint32_t ranges, std::uint32_t helpers, const RangeFn& fn) {
        ensure_workers(helpers);
        fn_.store(&fn, std::memory_order_relaxed);
        n_.store(n, std::memory_order_relaxed);
        done_.store(0, std::memory_order_relaxed);
        error_ = nullptr;
        const std::uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
        // The ticket carries the generation and the range count, so a claim by a worker still looking at an older
        // loop fails, and whether a range is left is decided from the ticket alone.
        ticket_.store(make_ticket(gen, ranges), std::memory_order_release);
        generation_.store(gen, std::memory_order_seq_cst);
        // Wake sleeping workers (the seq_cst pair with worker_loop: either a worker sees the new generation, or we
        // see it counted as asleep). No condition_variable call when every worker is still spinning.
        if (sleepers_.load(std::memory_order_seq_cst) > 0) {
            { const std::lock_guard<std::mutex> lock(sleep_mutex_); }
            wake_.notify_all();
        }

        in_parallel_loop = true;
        claim_and_run(gen);
        in_parallel_loop = false;
        // Wait for the ranges that workers started: they are short, so spin, then yield the CPU between checks.
        for (int spin = 0; done_.load(std::memory_order_acquire) != ranges; ++spin) {
            if (spin < 4096) {
                cpu_relax();
            } else {
                std::this_thread::yield();
            }
        }
        if (error_) std::rethrow_exception(error_);
    }

private:
    // Ticket layout: generation (32 bits) | range count (16) | next range to claim (16); a claim adds 1.
    static std::uint64_t make_ticket(std::uint32_t gen, std::uint32_t ranges) {
        return static_cast<std::uint64_t>(gen) << 32 | static_cast<std::uint64_t>(ranges) << 16;
    }
    static std::uint32_t ticket_generation(std::uint64_t t) { return static_cast<std::uint32_t>(t >> 32); }
    static std::uint32_t ticket_ranges(std::uint64_t t) { return static_cast<std::uint32_t>(t >> 16) & 0xffffu; }
    static std::uint32_t ticket_index(std::uint64_t t) { return static_cast<std::uint32_t>(t) & 0xffffu; }

    static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }

    void ensure_workers(std::uint32_t wanted) {
        const bool pin = threads_pinned();
        // A thread that starts loops (the model loader's, then the engine's) takes the first CPU.
        thread_local bool caller_pinned = false;
        if (pin && !caller_pinned) {
            pin_to_cpu(pthread_self(), 0);
            caller_pinned = true;
        }
        while (workers_.size() < wanted) {
            // The worker starts from the generation before the loop that needs it (run() publishes that loop after
            // this), so it joins that loop however late it starts.
            workers_.emplace_back([this, seen = generation_.load(std::memory_order_acquire)] { worker_loop(seen); });
            if (pin) pin_to_cpu(workers_.back().native_handle(), static_cast<int>(workers_.size()));
            workers_.back().detach();  // the pool lives for the process; workers sleep when idle
        }
    }
    static void pin_to_cpu(pthread_t t, int index) {
        static const cpu_set_t allowed = [] {
            cpu_set_t set;
            CPU_ZERO(&set);
            sched_getaffinity(0, sizeof(set), &set);
            return set;
        }();
        if (CPU_COUNT(&allowed) == 0) return;
        int k = index % CPU_COUNT(&allowed);
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &allowed) && k-- == 0) {
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(cpu, &one);
                pthread_setaffinity_np(t, sizeof(one), &one);
                return;
            }
        }
    }

    // Claims ranges of loop `gen` until none is left; returns when the counter has moved past them or to a newer loop.
    void claim_and_run(std::uint32_t gen) {
        std::uint64_t t = ticket_.load(std::memory_order_acquire);
        while (true) {
            if (ticket_generation(t) != gen) return;
            // The range count comes from the ticket itself. Reading it from a separate variable let a worker that
            // had just finished loop g see loop g+1's larger count while the ticket still showed g, claim a range
            // "of g" that did not exist, and run it with g+1's function (a range run twice, and a done count that
            // overshot, so the caller waited forever).
            const std::uint32_t ranges = ticket_ranges(t);
            const std::uint32_t index = ticket_index(t);
            if (index >= ranges) return;
            if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
                continue;
            }
            // The claim succeeded on an open range of loop `gen`, so the loop's parameters are this loop's (they
            // were written before its ticket was released), and its caller cannot return before this range is
            // counted done.
            const std::size_t n = n_.load(std::memory_order_relaxed);
            const std::size_t begin = n * index / ranges;
            const std::size_t end = n * (index + 1) / ranges;
            try {
                if (begin < end) (*fn_.load(std::memory_order_relaxed))(begin, end);
            } catch (...) {
                const std::lock_guard<std::mutex> lock(error_mutex_);
                if (!error_) error_ = std::current_exception();
            }
            done_.fetch_add(1, std::memory_order_acq_rel);
            t = ticket_.load(std::memory_order_acquire);
        }
    }

    void worker_loop(std::uint32_t seen) {
        in_parallel_loop = true;
        while (true) {
            std::uint32_t gen = generation_.load(std::memory_order_acquire);
            // Spin for the configured time (the clock is read every 64 pauses), then sleep.
            const auto budget = std::chrono::microseconds(spin_us().load(std::memory_order_relaxed));
            const auto spin_start = std::chrono::steady_clock::now();
            for (unsigned spin = 1; gen == seen; ++spin) {
                cpu_relax();
                gen = generation_.load(std::memory_order_acquire);
                if (spin % 64 == 0 && std::chrono::steady_clock::now() - spin_start >= budget) break;
            }
            if (gen == seen) {
                // Sleep until a new loop is published (std::atomic::wait is avoided: GCC 12's can miss wake-ups).
                sleeps_.fetch_add(1, std::memory_order_relaxed);
                std::unique_lock<std::mutex> lock(sleep_mutex_);
                sleepers_.fetch_add(1, std::memory_order_seq_cst);
                while (generation_.load(std::memory_order_seq_cst) == seen) wake_.wait(lock);
                sleepers_.fetch_sub(1, std::memory_order_relaxed);
                continue;
            }
            seen = gen;
            claim_and_run(gen);
        }
    }

public:
    // Times a worker gave up spinning and slept (for the profile).
    std::uint64_t sleeps() const {
        return sleeps_.load(std::memory_order_relaxed);
    }
    void reset_sleeps() {
        sleeps_.store(0, std::memory_order_relaxed);
    }

private:
    std::atomic<std::uint64_t> sleeps_{0};
    std::vector<std::thread> workers_;
    std::atomic<std::uint32_t> generation_{0};
    std::atomic<std::uint64_t> ticket_{0};
    std::atomic<const RangeFn*> fn_{nullptr};
    std::atomic<std::size_t> n_{0};
    std::atomic<std::uint32_t> done_{0};
    std::mutex error_mutex_;
    std::mutex sleep_mutex_;
    std::condition_variable wake_;
    std::atomic<int> sleepers_{0};
    std::exception_ptr error_;
};

Pool& pool() {
    static Pool* p = new Pool();  // never destroyed: detached workers may still be asleep on it at exit
    return *p;
}

std::mutex& pool_mutex() {
    static std::mutex m;
    return m;
}

// The profile. Written only by a thread holding pool_mutex() (the engine thread's top-level loops).
struct Profile {
    std::atomic<bool> on{false};
    std::atomic<std::uint64_t> loops{0};
    double loop_seconds = 0.0;
    std::chrono::steady_clock::time_point last_end{};  // of the previous timed loop; epoch: none yet
    struct Site {
        const char* file;
        int line;
        ParallelSiteStats stats;
    };
    std::vector<Site> sites;

    void add(const CallSite& where, std::chrono::steady_clock::time_point start,
             std::chrono::steady_clock::time_point end) {
        const double seconds = std::chrono::duration<double>(end - start).count();
        const double before = last_end == std::chrono::steady_clock::time_point{}
                                  ? 0.0
                                  : std::chrono::duration<double>(start - last_end).count();
        last_end = end;
        loop_seconds += seconds;
        for (Site& s : sites) {
            // The same file's name may be a different pointer in another translation unit (inline functions).
            if (s.line == where.line() &&
                (s.file == where.file_name() || std::strcmp(s.file, where.file_name()) == 0)) {
                ++s.stats.loops;
                s.stats.seconds += seconds;
                s.stats.seconds_before += before;
                return;
            }
        }
        std::string name = where.file_name();
        if (const auto src = name.rfind("src/"); src != std::string::npos) name.erase(0, src + 4);
        sites.push_back({where.file_name(), where.line(),
                         ParallelSiteStats{name + ":" + std::to_string(where.line()), 1, seconds, before}});
    }
};

Profile& profile() {
    static Profile p;
    return p;
}

}  // namespace

int num_threads() {
    return thread_count().load(std::memory_order_relaxed);
}

void set_num_threads(int n) {
    thread_count().store(std::max(1, n), std::memory_order_relaxed);
}

bool threads_pinned() {
    static const bool pinned = env_flag("MSA_PIN_THREADS");
    return pinned;
}

int worker_spin_us() {
    return spin_us().load(std::memory_order_relaxed);
}

void set_worker_spin_us(int us) {
    spin_us().store(std::max(0, us), std::memory_order_relaxed);
}

void set_parallel_profiling(bool on) {
    const std::lock_guard<std::mutex> lock(pool_mutex());
    profile().on.store(on, std::memory_order_relaxed);
    profile().last_end = {};  // the time while it was off is nobody's serial work
}

ParallelStats parallel_stats() {
    const std::lock_guard<std::mutex> lock(pool_mutex());
    ParallelStats s;
    s.loops = profile().loops.load(std::memory_order_relaxed);
    s.worker_sleeps = pool().sleeps();
    s.loop_seconds = profile().loop_seconds;
    for (const auto& site : profile().sites) s.sites.push_back(site.stats);
    return s;
}

void reset_parallel_stats() {
    const std::lock_guard<std::mutex> lock(pool_mutex());
    profile().loops.store(0, std::memory_order_relaxed);
    pool().reset_sleeps();
    profile().loop_seconds = 0.0;
    profile().last_end = {};
    profile().sites.clear();
}

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn,
                  CallSite where) {
    if (n == 0) return;
    if (in_parallel_loop) {  // nested: run inline in this thread
        fn(0, n);
        return;
    }
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_chunks = (n + grain - 1) / grain;
    // A few ranges per thread rather than one: threads claim them as they come, so a thread that starts late (a
    // worker waking from sleep, a core busy with something else, a slower core of a hybrid CPU) leaves its share to
    // the others instead of holding up the loop. At most kMaxRanges: the pool's ticket holds the count in 16 bits.
    constexpr std::size_t kRangesPerThread = 4;
    constexpr std::size_t kMaxRanges = 4096;
    const auto threads = static_cast<std::size_t>(num_threads());
    const auto ranges = static_cast<std::uint32_t>(std::min({max_chunks, threads * kRangesPerThread, kMaxRanges}));
    Profile& prof = profile();
    const bool profiling = prof.on.load(std::memory_order_relaxed);
    if (profiling) prof.loops.fetch_add(1, std::memory_order_relaxed);
    // One range, or one thread: run inline, and not as a nested loop, so loops inside fn may still use the pool.
    if (ranges <= 1 || threads <= 1) {
        fn(0, n);
        return;
    }
    // One loop at a time uses the pool; a second thread calling meanwhile runs its loop by itself.
    std::unique_lock<std::mutex> lock(pool_mutex(), std::try_to_lock);
    if (!lock.owns_lock()) {
        fn(0, n);
        return;
    }
    const auto t0 = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    pool().run(n, ranges, static_cast<std::uint32_t>(std::min<std::size_t>(ranges, threads) - 1), fn);
    if (profiling) prof.add(where, t0, std::chrono::steady_clock::now());
}

}  // namespace msa
