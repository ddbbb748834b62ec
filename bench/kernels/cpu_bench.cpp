// CPU speed of MSA Engine: memory bandwidth (STREAM-style triad, memcpy, read), GEMV/GEMM per weight format (also
// with the weights in cache: the kernel's own ceiling), MSA decode attention against dense, and the whole model's
// prefill and decode on random checkpoints of two configs. Writes a JSON array of {"figure", "value", "unit", "date",
// "machine", "commit", "threads", "load_average", ...} records. bench/run_cpu_bench.sh is the usual entry point.
//
//   msa_cpu_bench --out FILE --commit SHA [--threads N] [--models tiny,mid] [--model-dir DIR]
//       [--random-kv]        decode over random KV pages instead of after a real prefill (no prefill figure)
//       [--decode-tokens N]  decode steps per model (median reported)
//       [--cpu-time]         time by process CPU time instead of wall time (comparing versions on a busy machine
//                            with --threads 1)
//       [--quick]            skip the batch-256 GEMMs, batch-8 GEMVs and the 32K attention
//       [--gemv-only | --attention-only | --no-kernels]
//       [--warm-cache]       decode without evicting the last-level cache before each step (by default it is
//                            evicted: a model that fits in a server's 300-500 MiB L3 would otherwise decode from it)
//       [--evict-by-writing] evict by writing the buffer, as up to session 11 (the cache is then left dirty)
//       [--no-bandwidth]     skip the bandwidth tests (fractions of bandwidth are then null; for runs under valgrind,
//                            bench/cpu_decode_instructions.sh)
//       [--check]            print "msa_cpu_bench ok" and exit (does the binary run here?)
#include "common/bench_host.h"
#include "core/error.h"
#include "core/parallel.h"
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"
#include "kernels/bench_configs.h"
#include "kernels/cpu/activation_quant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/softmax_pv.h"
#include "kernels/random_weights.h"
#include "model/minimax_m3_model.h"

#include <nlohmann/json.hpp>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace msa::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// base with the fields of `more` added.
json with(json base, const json& more) {
    base.update(more);
    return base;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// --cpu-time: kernels are timed by the process's CPU time instead of wall time (for comparing versions on a shared
// machine with --threads 1, where wall time includes waiting for other jobs).
bool g_cpu_time = false;
// Evict the last-level cache before each decode step (--warm-cache turns it off).
bool g_cold_cache = true;
// Evict by writing instead of reading (--evict-by-writing: the method up to session 11, kept for comparisons).
bool g_evict_by_writing = false;

double process_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Minor page faults of the process so far (a first touch of a mapped page that is already in memory).
long minor_faults() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

double median_of(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median of `reps` timings of fn (after one warm-up call).
double time_median(int reps, const std::function<void()>& fn) {
    fn();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        const double c0 = process_cpu_seconds();
        fn();
        t.push_back(g_cpu_time ? process_cpu_seconds() - c0 : seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The 1-, 5- and 15-minute load averages (as `uptime` prints them).
std::vector<double> load_average() {
    std::ifstream in("/proc/loadavg");
    std::vector<double> v(3, -1.0);
    in >> v[0] >> v[1] >> v[2];
    return v;
}

struct Recorder {
    std::string date, machine, commit;
    json records = json::array();
    void add(const std::string& figure, double value, const std::string& unit, json extra = json::object()) {
        extra["figure"] = figure;
        extra["value"] = value;
        extra["unit"] = unit;
        extra["date"] = date;
        extra["machine"] = machine;
        extra["commit"] = commit;
        extra["threads"] = num_threads();
        extra["timing"] = g_cpu_time ? "process_cpu_time" : "wall";  // how kernels and decode steps were timed
        // OpenMP's waiting (spinning or sleeping threads between parallel regions) decides multi-thread decode on a
        // busy machine: record it.
        // MSA_WEIGHTS_HUGE_PAGES=0: the weights mapped in 4 KB pages instead of copied into huge pages.
        for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MSA_WEIGHTS_HUGE_PAGES"}) {
            const char* v = std::getenv(var);
            extra[var] = v ? v : "";
        }
        extra["simd"] = simd_kernels();          // the kernels' instruction set (MSA_NO_AVX512=1 picks AVX2)
        extra["spin_us"] = worker_spin_us();     // the pool's worker spin before sleeping (MSA_SPIN_US)
        extra["pinned"] = threads_pinned();      // pool threads bound to CPUs (MSA_PIN_THREADS)
        extra["load_average"] = load_average();  // the machine is shared: other jobs' load at record time
        records.push_back(extra);
        std::fprintf(stderr, "%-58s %12.3f %s\n", figure.c_str(), value, unit.c_str());
    }
};

std::string machine_name() {
    return msa::bench::cpu_model_name() + ", " + std::to_string(omp_get_num_procs()) + " CPUs";
}

// Evicts the last-level cache: reads every cache line of a buffer of twice its size. Decode steps run after this
// (unless --warm-cache), so their weights and KV come from memory, as for a model larger than the cache. The sweep
// only reads, so the lines it leaves are clean, as the weights a real decode streams through the cache are; a sweep
// that writes (up to session 11; --evict-by-writing) leaves the whole cache dirty, and the next step's misses write
// it back, traffic a real decode does not have (docs/performance.md, session 12, compares the two). It runs on the
// engine's own thread pool: OpenMP's threads would keep spinning after the loop and take the cores the decode step
// needs.
void evict_llc() {
    static std::vector<std::uint64_t> junk(std::max<std::size_t>(2 * llc_bytes(), std::size_t{64} << 20) / 8, 1);
    static std::atomic<std::uint64_t> sink{0};
    parallel_for(junk.size(), std::size_t{1} << 16, [](std::size_t b, std::size_t e) {
        if (g_evict_by_writing) {
            for (std::size_t i = b; i < e; ++i) junk[i] += i;
            return;
        }
        std::uint64_t sum = 0;
        for (std::size_t i = b; i < e; i += 8) sum += junk[i];  // one word per 64-byte line
        sink.fetch_add(sum, std::memory_order_relaxed);
    });
}

// STREAM triad a = b + s * c over doubles, 3 arrays of memory_buffer_bytes(); bytes counted 24 per element (no
// write-allocate, as STREAM counts). Best of 5.
double triad_gbps(int threads) {
    const std::size_t n = memory_buffer_bytes() / 8;
    std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
    double best = 0;
    for (int r = 0; r < 6; ++r) {
        const auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0 * c[i];
        const double s = seconds_since(t0);
        if (r > 0) best = std::max(best, 24.0 * static_cast<double>(n) / s / 1e9);
    }
    return best + a[n / 3] * 0.0;
}

// Copy bandwidth: memcpy of memory_buffer_bytes() between two buffers split over the threads; 2 bytes moved (read +
// write) per byte copied. Best of 5 after a warm-up.
double copy_gbps(int threads) {
    const std::size_t n = memory_buffer_bytes();
    std::vector<char> src(n, 1), dst(n, 0);
    double best = 0;
    for (int r = 0; r < 6; ++r) {
        const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
        {
            const std::size_t parts = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t me = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t lo = n * me / parts, hi = n * (me + 1) / parts;
            std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
        }
        const double s = seconds_since(t0);
        if (r > 0) best = std::max(best, 2.0 * static_cast<double>(n) / s / 1e9);
    }
    return best + dst[n / 3] * 0.0;
}

// Read bandwidth, the access pattern of decode (weights and KV are only read): 64-bit sums over
// memory_buffer_bytes() split over the threads, four independent accumulators per thread. Best of 5 after a warm-up.
double read_gbps(int threads) {
    const std::size_t n = memory_buffer_bytes() / 8;  // 64-bit words
    std::vector<std::uint64_t> a(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = i;
    double best = 0;
    std::uint64_t sink = 0;
    for (int r = 0; r < 6; ++r) {
        const auto t0 = Clock::now();
        std::uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const std::size_t parts = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t me = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t lo = n * me / parts / 4 * 4, hi = n * (me + 1) / parts / 4 * 4;
            std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (std::size_t i = lo; i < hi; i += 4) {
                s0 += a[i];
                s1 += a[i + 1];
                s2 += a[i + 2];
                s3 += a[i + 3];
            }
            total += s0 + s1 + s2 + s3;
        }
        const double s = seconds_since(t0);
        sink += total;
        if (r > 0) best = std::max(best, 8.0 * static_cast<double>(n) / s / 1e9);
    }
    return best + static_cast<double>(sink & 1) * 0.0;
}

void bench_gemv(Recorder& rec, double triad, bool gemv_only) {
    std::mt19937 rng(1);
    const std::int64_t N = 4096, K = 4096;
    struct Case {
        const char* name;
        LinearFormat format;
        int mode;  // 0 exact, 1 int8, 2 w4a4
    };
    const Case cases[] = {{"bf16_exact", LinearFormat::bf16, 0},   {"mxfp8_exact", LinearFormat::mxfp8, 0},
                          {"nvfp4_exact", LinearFormat::nvfp4, 0}, {"nvfp4_int8", LinearFormat::nvfp4, 1},
                          {"nvfp4_w4a4", LinearFormat::nvfp4, 2}};
    for (const Case& c : cases) {
        // Enough matrices that they do not fit in the caches (>= 192 MiB), used round-robin.
        std::vector<OwnedLinear> ws;
        std::size_t total = 0;
        while (total < (192u << 20)) {
            ws.push_back(random_linear(c.format, N, K, rng, ws.empty() ? nullptr : &ws.front()));
            total += ws.back().view.bytes();
        }
        for (std::int64_t m : {1, 8, 256}) {
            if (gemv_only && m != 1) continue;
            std::vector<float> x(static_cast<std::size_t>(m * K)), y(static_cast<std::size_t>(m * N));
            for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            cpu::Q8Rows xq;
            const std::size_t count = m == 256 ? 2 : ws.size();
            const double t = time_median(m == 256 ? 3 : 5, [&] {
                for (std::size_t i = 0; i < count; ++i) {
                    if (c.mode == 2) {
                        cpu::quantize_rows_w4a4(x.data(), m, K, cpu::W4a4Input::fc1, xq);
                        cpu::linear_q8(ws[i].view, xq, y.data());
                    } else {
                        cpu::linear(ws[i].view, x.data(), m, y.data(),
                                    c.mode == 1 ? ActivationMode::int8 : ActivationMode::exact);
                    }
                }
            }) / static_cast<double>(count);
            const double bytes = static_cast<double>(ws[0].view.bytes());
            if (m == 1) {
                // The kernel's own speed with its weights in cache (256 KiB of them): the rate it could stream at
                // if memory kept up. A kernel slower than the memory here cannot reach the bandwidth.
                const std::int64_t row_bytes =
                    c.format == LinearFormat::bf16 ? 2 * K : (c.format == LinearFormat::mxfp8 ? K : K / 2);
                OwnedLinear hot = random_linear(c.format, (256 << 10) / row_bytes, K, rng);
                const double th = time_median(50, [&] {
                    for (int rep = 0; rep < 20; ++rep) {
                        if (c.mode == 2) {
                            cpu::quantize_rows_w4a4(x.data(), m, K, cpu::W4a4Input::fc1, xq);
                            cpu::linear_q8(hot.view, xq, y.data());
                        } else {
                            cpu::linear(hot.view, x.data(), m, y.data(),
                                        c.mode == 1 ? ActivationMode::int8 : ActivationMode::exact);
                        }
                    }
                }) / 20.0;
                rec.add(std::string("gemv_") + c.name + "_m1_in_cache", static_cast<double>(hot.view.bytes()) / th / 1e9,
                        "GB/s", {{"rows", hot.view.rows}, {"cols", K}, {"batch", 1}, {"seconds", th}});
            }
            json extra = {{"rows", N}, {"cols", K}, {"batch", m}, {"seconds", t}};
            if (m == 256) {
                rec.add(std::string("gemm_") + c.name + "_m256", 2.0 * N * K * m / t / 1e9, "GFLOP/s", extra);
            } else {
                extra["fraction_of_bandwidth"] = bytes / t / 1e9 / triad;
                rec.add(std::string("gemv_") + c.name + "_m" + std::to_string(m), bytes / t / 1e9, "GB/s", extra);
            }
        }
    }
}

// One attention layer's decode step (M3 geometry: 64 q heads... scaled to 16 q heads over 4 KV heads, head dim
// 128, NVFP4 KV, top-16) at a long context: MSA (indexer + top-k + sparse attention) against dense attention.
void bench_attention(Recorder& rec, double triad, bool quick) {
    const int H = 16, Hkv = 4, D = 128, topk = 16;
    for (int ctx : {8192, 32768}) {
        if (quick && ctx > 8192) continue;
        const int blocks = ctx / 128;
        KvLayerView kv;
        kv.dtype = KvCacheDtype::NVFP4;
        kv.num_kv_heads = Hkv;
        kv.head_dim = D;
        kv.index_dim = D;
        kv.page_stride = kv.layer_page_bytes();
        std::vector<std::uint8_t> storage(kv.page_stride * static_cast<std::size_t>(blocks));
        std::mt19937 rng(3);
        for (auto& b : storage) b = static_cast<std::uint8_t>(rng() & 0x37);  // codes and scales in range
        kv.base = storage.data();
        std::vector<std::int32_t> pages(static_cast<std::size_t>(blocks));
        for (int b = 0; b < blocks; ++b) pages[b] = b;
        std::vector<float> q(H * D), iq(Hkv * D), out(H * D);
        for (auto& v : q) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        for (auto& v : iq) v = std::uniform_real_distribution<float>(-1, 1)(rng);
        const AttentionSeq seq{0, 1, ctx, pages.data()};
        const cpu::AttentionShape shape{H, Hkv, D, 0.0883883f};
        std::vector<std::int32_t> sel(Hkv * topk);
        cpu::MsaIndexOptions io;
        io.topk = topk;
        const double t_index = time_median(9, [&] { cpu::msa_select_blocks(kv.index_k(), {&seq, 1}, iq.data(), Hkv, io, sel.data()); });
        const double t_sparse = time_median(9, [&] {
            cpu::sparse_attention(kv, {&seq, 1}, q.data(), sel.data(), topk, shape, AttentionNumerics::exact, out.data());
        });
        const double t_dense = time_median(5, [&] {
            cpu::dense_attention(kv, {&seq, 1}, q.data(), shape, AttentionNumerics::exact, out.data());
        });
        if (ctx == 8192) {
            // The fused NVFP4 key product alone (dot_kv_rows, the indexer's and the attention's QK kernel), one
            // thread's work over every index key of the context, for 1, 2 and 4 query rows (decode's index heads or
            // a group's query heads): its cost per key is mostly the decoding of the key, shared by the rows.
            std::vector<float> dots(4 * 128), scratch;
            std::vector<float> a(4 * D);
            for (auto& v : a) v = std::uniform_real_distribution<float>(-1, 1)(rng);
            for (const int r : {1, 2, 4}) {
                const double t = time_median(15, [&] {
                    for (int b = 0; b < blocks; ++b)
                        cpu::dot_kv_rows(kv.index_k(), b, 128, cpu::KvRead::exact, a.data(), r, dots.data(), 128, scratch);
                });
                rec.add("kv_dot_nvfp4_d128_r" + std::to_string(r), t / ctx * 1e9, "ns per key",
                        {{"keys", ctx}, {"query_rows", r}, {"seconds", t}});
            }
            // The PV step of one KV head over every value row of the context, for 1 and 4 query rows: straight from
            // the page (pv_kv_rows, decode's path where a fused kernel exists) against reading the rows to floats
            // and then pv_accumulate_rows (the path of blocks with several users, and of CPUs without AVX-512).
            const PagedRows vrows = kv.v(0);
            std::vector<float> p(4 * 128), alpha(4, 0.5f), acc(4 * D, 0.0f), vals(128 * D);
            for (auto& v : p) v = std::uniform_real_distribution<float>(0, 1)(rng);
            for (const int r : {1, 4}) {
                const double t_read = time_median(15, [&] {
                    for (int b = 0; b < blocks; ++b) {
                        cpu::read_kv_rows(vrows, b, 128, cpu::KvRead::exact, vals.data());
                        cpu::pv_accumulate_rows(acc.data(), alpha.data(), p.data(), 128, vals.data(), 128, D, false, r);
                    }
                });
                rec.add("kv_pv_read_then_accumulate_nvfp4_d128_r" + std::to_string(r), t_read / ctx * 1e9,
                        "ns per value row", {{"rows", ctx}, {"query_rows", r}, {"seconds", t_read}});
                if (!cpu::pv_kv_rows_fused(vrows, cpu::KvRead::exact)) continue;
                const double t_fused = time_median(15, [&] {
                    for (int b = 0; b < blocks; ++b)
                        cpu::pv_kv_rows(vrows, b, 128, cpu::KvRead::exact, p.data(), 128, r, alpha.data(), acc.data());
                });
                rec.add("kv_pv_fused_nvfp4_d128_r" + std::to_string(r), t_fused / ctx * 1e9, "ns per value row",
                        {{"rows", ctx}, {"query_rows", r}, {"seconds", t_fused}});
            }
        }
        const double row = 72.0;  // NVFP4 bytes per 128-value row
        const double msa_bytes = ctx * row + Hkv * 2.0 * topk * 128 * row;
        const double dense_bytes = Hkv * 2.0 * ctx * row;
        const json extra = {{"context", ctx}, {"q_heads", H}, {"kv_heads", Hkv}, {"topk_blocks", topk}};
        rec.add("attention_decode_msa_ctx" + std::to_string(ctx), (t_index + t_sparse) * 1e6, "us",
                with(extra, {{"indexer_us", t_index * 1e6}, {"sparse_attention_us", t_sparse * 1e6},
                                    {"bytes", msa_bytes},
                                    {"fraction_of_bandwidth", msa_bytes / (t_index + t_sparse) / 1e9 / triad}}));
        rec.add("attention_decode_dense_ctx" + std::to_string(ctx), t_dense * 1e6, "us",
                with(extra, {{"bytes", dense_bytes}, {"fraction_of_bandwidth", dense_bytes / t_dense / 1e9 / triad}}));
    }
}

// KV bytes one decode token reads at context `ctx`: every index key of the MSA layers, the selected blocks' K and V
// (all blocks for dense layers).
double kv_bytes_per_decode_token(const ModelConfig& c, KvCacheDtype dtype, int ctx, int topk) {
    const double row = static_cast<double>(kv_row_data_bytes(dtype, c.head_dim) + kv_row_scale_bytes(dtype, c.head_dim));
    double bytes = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        const bool msa = c.is_msa_layer(l);
        const int attended = msa ? std::min(ctx, (std::min(ctx / 128, topk - 1) * 128) + ctx % 128 + 1) : ctx;
        bytes += 2.0 * c.num_key_value_heads * attended * row;
        if (msa) bytes += ctx * row;
    }
    return bytes;
}

// Per decode token: loops, worker sleeps, microseconds inside the pool's loops (all, and per call site, largest
// first) and outside them (serial work and loops run inline; per site: the serial stretch that ends at it).
json pool_profile_per_token(const ParallelStats& st, double wall_seconds, int tokens) {
    const double per = 1.0 / std::max(tokens, 1);
    json sites = json::array();
    std::vector<ParallelSiteStats> by_time = st.sites;
    std::sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    for (const auto& s : by_time)
        sites.push_back({{"site", s.site},
                         {"loops", s.loops * per},
                         {"us", s.seconds * per * 1e6},
                         {"us_serial_before", s.seconds_before * per * 1e6}});
    return {{"loops", st.loops * per},
            {"worker_sleeps", st.worker_sleeps * per},
            {"us_in_pool_loops", st.loop_seconds * per * 1e6},
            {"us_outside", (wall_seconds - st.loop_seconds) * per * 1e6},
            {"sites", sites}};
}

void bench_model(Recorder& rec, const std::string& name, const std::filesystem::path& cache_dir, double triad,
                 bool random_kv, int decode_tokens) {
    BenchModel bm = bench::bench_model(name);
    if (decode_tokens > 0) bm.decode_tokens = decode_tokens;
    const auto dir = cache_dir / name;
    const auto marker = dir / "config.json";
    bool fresh = true;
    if (std::filesystem::exists(marker)) {
        std::ifstream in(marker);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        fresh = text != bm.spec.config_json;
    }
    if (fresh) {
        std::fprintf(stderr, "writing random checkpoint %s ...\n", dir.string().c_str());
        std::filesystem::remove_all(dir);
        write_random_checkpoint(dir, bm.spec);
    }
    ModelOptions o;
    o.num_kv_pages = (bm.prefill_tokens + bm.decode_tokens) / 128 + 2;
    const auto t_load = Clock::now();
    auto model = MiniMaxM3Model::load(dir.string(), o);
    const double load_s = seconds_since(t_load);
    std::mt19937 rng(5);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(bm.prefill_tokens + bm.decode_tokens));
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(model->vocab_size()));
    std::vector<std::int32_t> pages(static_cast<std::size_t>(o.num_kv_pages));
    for (std::size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<std::int32_t>(i);
    auto run = [&](int past, int n, int logits) {
        ForwardBatch batch;
        batch.seqs.push_back({std::span<const std::int32_t>(tokens.data() + past, static_cast<std::size_t>(n)), past,
                              pages, logits});
        ForwardOutput out;
        model->forward(batch, {}, out);
    };
    // Prefill in chunks of 512 (as the engine would), then decode one token at a time. With random_kv the prompt's
    // KV pages are filled with random valid codes instead (decode reads the same bytes; values do not change speed).
    const auto t0 = Clock::now();
    const double prefill_c0 = process_cpu_seconds();
    if (random_kv) {
        std::mt19937 kv_rng(7);
        for (int p = 0; p * 128 < bm.prefill_tokens; ++p)
            for (auto& b : model->kv_cache().page(pages[static_cast<std::size_t>(p)])) b = static_cast<std::uint8_t>(kv_rng() & 0x37);
    } else {
        for (int p = 0; p < bm.prefill_tokens; p += 512) run(p, std::min(512, bm.prefill_tokens - p), p + 512 >= bm.prefill_tokens);
    }
    const double prefill_s = g_cpu_time ? process_cpu_seconds() - prefill_c0 : seconds_since(t0);
    std::vector<double> steps;
    // The thread pool's profile over the decode steps: loops per token, worker sleeps, time inside loops per site.
    if (g_cold_cache) evict_llc();  // allocated and run once before the profile starts
    set_parallel_profiling(true);
    reset_parallel_stats();
    double decode_wall = 0.0;  // the steps' wall time, without the evictions
    // Per step: each site's time in its loops (the profile's totals differenced), for medians over the steps that
    // the VM's outliers and the first steps' page faults do not move; and the step's page faults.
    std::map<std::string, std::vector<double>> site_step_us;
    std::vector<double> step_faults;
    ParallelStats last_stats;
    for (int i = 0; i < bm.decode_tokens; ++i) {
        if (g_cold_cache) {  // a loop of the pool, kept out of the profile
            set_parallel_profiling(false);
            evict_llc();
            set_parallel_profiling(true);
        }
        const long faults0 = minor_faults();
        const auto t = Clock::now();
        const double c0 = process_cpu_seconds();
        run(bm.prefill_tokens + i, 1, 1);
        const double wall = seconds_since(t);
        step_faults.push_back(static_cast<double>(minor_faults() - faults0));
        decode_wall += wall;
        steps.push_back(g_cpu_time ? process_cpu_seconds() - c0 : wall);
        const ParallelStats now = parallel_stats();
        for (const ParallelSiteStats& site : now.sites) {
            double before = 0.0;
            for (const ParallelSiteStats& prev : last_stats.sites)
                if (prev.site == site.site) before = prev.seconds;
            auto& v = site_step_us[site.site];
            v.resize(static_cast<std::size_t>(i), 0.0);  // a site not seen in earlier steps took 0 there
            v.push_back((site.seconds - before) * 1e6);
        }
        last_stats = now;
    }
    json site_medians = json::object();
    for (auto& [site, v] : site_step_us) {
        v.resize(static_cast<std::size_t>(bm.decode_tokens), 0.0);
        site_medians[site] = median_of(v);
    }
    const ParallelStats pool_stats = parallel_stats();
    set_parallel_profiling(false);
    std::sort(steps.begin(), steps.end());
    const double step_s = steps[steps.size() / 2];
    const ModelConfig& c = model->config();
    const int topk = c.sparse.topk_blocks;
    const double weight_bytes = static_cast<double>(model->weight_bytes_per_token());
    const double kv_bytes = kv_bytes_per_decode_token(c, model->kv_dtype(), bm.prefill_tokens, topk);
    const json extra = {
        {"model", name},
        {"hidden_size", c.hidden_size},
        {"layers", c.num_hidden_layers},
        {"kv_cache_dtype", std::string(kv_cache_dtype_name(model->kv_dtype()))},
        {"context", bm.prefill_tokens},
        {"cache", !g_cold_cache        ? "warm"
                  : g_evict_by_writing ? "cold: last-level cache evicted by writing before each decode step"
                                       : "cold: last-level cache evicted by reading before each decode step"},
        {"llc_bytes", llc_bytes()},
        {"load_seconds", load_s}};
    if (!random_kv) {
        rec.add("model_" + name + "_prefill", bm.prefill_tokens / prefill_s, "tokens/s",
                with(extra, {{"tokens", bm.prefill_tokens}, {"seconds", prefill_s}}));
    }
    const double achieved = (weight_bytes + kv_bytes) / step_s / 1e9;
    rec.add("model_" + name + "_decode", 1.0 / step_s, "tokens/s",
            with(extra, {{"median_step_seconds", step_s},
                         {"weight_bytes_per_token", weight_bytes},
                         {"kv_bytes_per_token", kv_bytes},
                         {"achieved_GBps", achieved},
                         {"fraction_of_bandwidth", achieved / triad},
                         {"pool", pool_profile_per_token(pool_stats, decode_wall, bm.decode_tokens)},
                         {"pool_site_median_us", site_medians},
                         {"minor_faults_per_step", step_faults}}));
}

int run(int argc, char** argv) {
    std::string out_path, models = "tiny,mid", model_dir = "/tmp/msa_bench_models";
    Recorder rec;
    rec.commit = "unknown";
    bool kernels = true, random_kv = false, gemv_only = false, attention_only = false, quick = false;
    bool bandwidths = true;
    int decode_tokens = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            MSA_CHECK(i + 1 < argc, "{} needs a value", a);
            return argv[++i];
        };
        if (a == "--out") out_path = next();
        else if (a == "--commit") rec.commit = next();
        else if (a == "--models") models = next();
        else if (a == "--model-dir") model_dir = next();
        else if (a == "--no-kernels") kernels = false;
        else if (a == "--random-kv") random_kv = true;
        else if (a == "--gemv-only") gemv_only = true;
        else if (a == "--attention-only") attention_only = true;
        else if (a == "--cpu-time") g_cpu_time = true;
        else if (a == "--quick") quick = true;
        else if (a == "--no-bandwidth") bandwidths = false;
        else if (a == "--warm-cache") g_cold_cache = false;
        else if (a == "--evict-by-writing")
            g_evict_by_writing = true;
        else if (a == "--check") {
            std::printf("msa_cpu_bench ok\n");
            return 0;
        }
        else if (a == "--decode-tokens") decode_tokens = std::stoi(next());
        else if (a == "--threads") set_num_threads(std::stoi(next()));
        else fail("unknown argument '{}' (see the comment at the top of cpu_bench.cpp)", a);
    }
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    rec.date = date;
    rec.machine = machine_name();

    // Decode fractions are stated against the largest of the measured bandwidths, each taken with the thread count
    // the decode runs with (none with --no-bandwidth: the fractions come out infinite, written as null).
    double bandwidth = 0.0;
    if (bandwidths) {
        const double triad1 = triad_gbps(1);
        const double triad = triad_gbps(num_threads());
        rec.add("stream_triad_1_thread", triad1, "GB/s");
        rec.add("stream_triad", triad, "GB/s");
        const double copy = copy_gbps(num_threads());
        rec.add("memcpy_bandwidth", copy, "GB/s");
        const double read = read_gbps(num_threads());
        rec.add("read_bandwidth", read, "GB/s");
        bandwidth = std::max({triad, copy, read});
        rec.add("reference_bandwidth", bandwidth, "GB/s",
                {{"buffer_bytes", memory_buffer_bytes()}, {"llc_bytes", llc_bytes()}});
    }
    if (kernels) {
        if (!attention_only) bench_gemv(rec, bandwidth, gemv_only || quick);
        if (!gemv_only) bench_attention(rec, bandwidth, quick);
    }
    std::size_t start = 0;
    while (start < models.size()) {
        const std::size_t comma = models.find(',', start);
        const std::string name = models.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!name.empty()) bench_model(rec, name, model_dir, bandwidth, random_kv, decode_tokens);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (!out_path.empty()) {
        std::ofstream out(out_path);
        out << rec.records.dump(1) << "\n";
        MSA_CHECK(out.good(), "cannot write {}", out_path);
    }
    return 0;
}

}  // namespace
}  // namespace msa::bench

int main(int argc, char** argv) {
    try {
        return msa::bench::run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
