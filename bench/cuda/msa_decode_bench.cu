// MSA decode benchmark (workloads.md sections 1 and 3): CUDA graph of 120 calls, 5 warm-up replays, 20 timed
// replays, median per call, inputs rotated so the working set exceeds 120 MiB. Prints one JSON object.
// Usage: msa_cuda_decode_bench [quick|full|case B L q_len|sel B:L:q,B:L:q,...|trace B:L:q,...]   (default full: low-latency, vLLM
// comparison and the 28-case decode suite; sel: the listed cases with the full timing protocol; trace: the same plus
// each case's phase timeline, from a build of the decode kernels with -DMSA_DECODE_TRACE). Environment:
// MSA_IDX=simt / MSA_ATTN=simt select the SIMT stages, MSA_NO_PDL=1 turns off programmatic dependent launch,
// MSA_CLUSTER / MSA_PREFETCH (0 auto, 1 off, 2 on), MSA_SPLITS, MSA_IDX_PARTS, MSA_IDX_PPW set the plan options of
// msa_decode.h, MSA_IDX_PERSIST=2 (persistent) and MSA_IDX_CTAS the indexer grid, MSA_READY=2 ready flags
// instead of the grid wait, MSA_WARP_PIPE (0 auto, 1 off, 2 on) the per-warp page pipeline,
// MSA_IDX_PDL=1 no PDL on the indexer launch, MSA_ATTN_WARPS=4/8 the attention CTA size, MSA_ATTN_TOPK (1 in the
// indexer, 2 in the attention CTAs) where the top-k runs, MSA_IDX_TRIGGER (1 after its scores, 2 after its wait) the
// indexer's dependent launch, MSA_ATTN_ORDER=2 request-major attention CTAs, MSA_ATTN_LEAN (1 off, 2 on) the lean 4-warp attention; MSA_TAG labels the output. "case" runs one case with 1 warm-up and 2 timed replays (for profilers).
#include "kernels/cuda/msa_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace msa::cuda;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "CUDA %s line %d\n", cudaGetErrorString(e_), __LINE__); std::exit(2); } } while (0)

static double copy_bw() {
    const size_t n = size_t(1) << 30; void *a, *b; CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0)); for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaFree(a)); CK(cudaFree(b)); return 2.0 * n * 10 / (ms * 1e-3);
}

static MsaDecodeOptions env_options() {
    MsaDecodeOptions o;
    auto is = [](const char* k, const char* v) { const char* e = std::getenv(k); return e && std::strcmp(e, v) == 0; };
    if (is("MSA_IDX", "simt")) o.indexer = MsaImpl::kSimt;
    if (is("MSA_ATTN", "simt")) o.attention = MsaImpl::kSimt;
    if (is("MSA_NO_PDL", "1")) o.pdl = false;
    auto num = [](const char* k) { const char* e = std::getenv(k); return e ? std::atoi(e) : 0; };
    o.attn_cluster = num("MSA_CLUSTER");
    o.prefetch = num("MSA_PREFETCH");
    o.attn_splits = num("MSA_SPLITS");
    o.idx_parts = num("MSA_IDX_PARTS");
    o.idx_pages_per_warp = num("MSA_IDX_PPW");
    o.idx_persistent = num("MSA_IDX_PERSIST");
    o.idx_ctas = num("MSA_IDX_CTAS");
    o.attn_ready = num("MSA_READY");
    o.attn_warp_pipe = num("MSA_WARP_PIPE");
    o.idx_pdl = num("MSA_IDX_PDL");
    o.attn_warps = num("MSA_ATTN_WARPS");
    o.idx_nt_pass = num("MSA_IDX_NT");
    o.idx_fp8 = num("MSA_IDX_FP8");
    o.idx_q8_wgmma = num("MSA_Q8_WGMMA");
    o.attn_topk = num("MSA_ATTN_TOPK");
    o.idx_trigger = num("MSA_IDX_TRIGGER");
    o.attn_order = num("MSA_ATTN_ORDER");
    o.attn_lean = num("MSA_ATTN_LEAN");
    return o;
}
static int g_warm = 5, g_reps = 20;
static bool g_trace = false;  // "trace" mode: phase timeline instead of timing (needs a -DMSA_DECODE_TRACE build)

// Trace mode: the per-call event stamps of one replay of the 120-call graph (set_decode_trace), averaged over calls
// 20..119 relative to each call's first indexer CTA start; also the mean call period (start to next start).
static void print_trace(const std::vector<unsigned long long>& t, int calls) {
    constexpr int E = kDecodeTraceEvents;
    static const char* names[E] = {"idx_start",   "idx_waited",    "idx_image",   "idx_scored",    "topk_start",
                                   "topk_loaded", "topk_inserted", "topk_end",    "attn_start",    "attn_waited",
                                   "attn_pages",  "attn_computed", "attn_slabs",  "attn_merged",   "attn_synced",
                                   "attn_weighted", "attn_stored", "attn_end"};
    double mn[E] = {}, mx[E] = {}, period = 0;
    int n = 0, np = 0;
    for (int c = 20; c < calls; ++c) {
        const unsigned long long* v = t.data() + size_t(c) * 2 * E;
        const double t0 = double(v[kTrIdxStart]);
        for (int e = 0; e < E; ++e) {
            mn[e] += v[e] == ~0ull ? 0.0 : (double(v[e]) - t0) / 1e3;
            mx[e] += v[E + e] == 0ull ? 0.0 : (double(v[E + e]) - t0) / 1e3;
        }
        ++n;
        if (c + 1 < calls) { period += (double(t[size_t(c + 1) * 2 * E + kTrIdxStart]) - t0) / 1e3; ++np; }
    }
    std::printf(",\"trace\":{\"period_us\":%.3f", period / np);
    for (int e = 0; e < E; ++e) std::printf(",\"%s\":[%.3f,%.3f]", names[e], mn[e] / n, mx[e] / n);
    std::printf("}");
}

static void run(const char* suite, int B, int L, int q_len, double bw, bool& first) {
    std::mt19937 rng(1701);
    std::vector<int> lens(B);
    for (int i = 0; i + 1 < B; i += 2) {
        const int d = std::uniform_int_distribution<int>(L / 20, L / 4)(rng);
        lens[i] = L + d; lens[i + 1] = L - d;
    }
    if (B % 2) lens[B - 1] = L;
    int maxlen = *std::max_element(lens.begin(), lens.end());
    const int max_blocks = (maxlen + 127) / 128;
    long long blocks = 0; for (int l : lens) blocks += (l + 127) / 128;
    const double set_bytes = double(blocks) * (kPageHeadBytes * 9);
    const int R = std::clamp(int(2.0 * 60 * 1048576 / set_bytes) + 1, 1, 120);
    const size_t npages = size_t(blocks) * R;
    std::uint8_t *kc, *vc, *ikc;
    CK(cudaMalloc(&kc, npages * 4 * kPageHeadBytes)); CK(cudaMalloc(&vc, npages * 4 * kPageHeadBytes)); CK(cudaMalloc(&ikc, npages * kPageHeadBytes));
    // random NVFP4 codes; scales in a sane E4M3 range (0x30..0x40)
    {   // 64 random pages (scales in a sane E4M3 range 0x30..0x3F), replicated by doubling device copies
        const size_t chunk = 64 * size_t(kPageHeadBytes), total = npages * 4 * size_t(kPageHeadBytes);
        std::vector<std::uint8_t> h(chunk);
        for (size_t i = 0; i < chunk; ++i) h[i] = (i % kPageHeadBytes) >= 8192 ? 0x30 + (rng() & 15) : rng();
        CK(cudaMemcpy(kc, h.data(), std::min(chunk, total), cudaMemcpyHostToDevice));
        for (size_t done = std::min(chunk, total); done < total; done *= 2)
            CK(cudaMemcpy(kc + done, kc, std::min(done, total - done), cudaMemcpyDeviceToDevice));
    }
    CK(cudaMemcpy(vc, kc, npages * 4 * kPageHeadBytes, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(ikc, kc, npages * kPageHeadBytes, cudaMemcpyDeviceToDevice));
    std::vector<int> pt(size_t(R) * B * max_blocks, 0);
    size_t next = 0;
    for (int r = 0; r < R; ++r) for (int b = 0; b < B; ++b) for (int j = 0; j < (lens[b] + 127) / 128; ++j) pt[(size_t(r) * B + b) * max_blocks + j] = int(next++);
    std::shuffle(pt.begin(), pt.end(), rng);  // random physical placement (values stay a permutation + zeros)
    int *dpt, *dlens, *dtop; std::uint8_t *dq, *diq; float* dout; void* ws;
    CK(cudaMalloc(&dpt, pt.size() * 4)); CK(cudaMemcpy(dpt, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dlens, B * 4)); CK(cudaMemcpy(dlens, lens.data(), B * 4, cudaMemcpyHostToDevice));
    MsaGeometry geo{64, 4, 16};
    auto plan = make_decode_plan(geo, B, q_len, max_blocks, env_options());
    CK(cudaMalloc(&ws, plan.total_bytes));
    init_decode_workspace(plan, ws, 0);
    const size_t nq = size_t(B) * q_len * 64 * 128;
    std::vector<std::uint8_t> hq(nq); for (auto& x : hq) x = 0x30 + (rng() % 24) + (rng() & 0x80);
    CK(cudaMalloc(&dq, nq)); CK(cudaMemcpy(dq, hq.data(), nq, cudaMemcpyHostToDevice)); diq = dq;
    CK(cudaMalloc(&dout, nq * 4)); CK(cudaMalloc(&dtop, size_t(B) * q_len * 4 * 16 * 4));
    cudaStream_t st; CK(cudaStreamCreate(&st));
    cudaGraph_t g; cudaGraphExec_t ge;
    unsigned long long* dtrace = nullptr;
    constexpr int kTraceWords = 2 * kDecodeTraceEvents;
    if (g_trace) CK(cudaMalloc(&dtrace, 120 * kTraceWords * sizeof(unsigned long long)));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int c = 0; c < 120; ++c) {
        MsaDecodeArgs a{dq, diq, kc, vc, ikc, dpt + size_t(c % R) * B * max_blocks, dlens, dout, dtop, ws};
        if (g_trace) set_decode_trace(dtrace + size_t(c) * kTraceWords);
        msa_decode(plan, a, st);
    }
    set_decode_trace(nullptr);
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < g_warm; ++i) CK(cudaGraphLaunch(ge, st));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int i = 0; i < g_reps; ++i) {
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); us.push_back(ms * 1000.0 / 120);
    }
    std::vector<unsigned long long> trace;
    if (g_trace) {  // one more replay with the stamps reset: mins all-ones, maxes zero
        for (int c = 0; c < 120; ++c) {
            CK(cudaMemsetAsync(dtrace + size_t(c) * kTraceWords, 0xFF, kTraceWords / 2 * sizeof(unsigned long long), st));
            CK(cudaMemsetAsync(dtrace + size_t(c) * kTraceWords + kTraceWords / 2, 0, kTraceWords / 2 * sizeof(unsigned long long), st));
        }
        CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
        trace.resize(120 * size_t(kTraceWords));
        CK(cudaMemcpy(trace.data(), dtrace, trace.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        cudaFree(dtrace);
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    const double nrep = double(us.size());
    double mean = 0, var = 0; for (double x : us) mean += x / nrep; for (double x : us) var += (x - mean) * (x - mean) / nrep;
    const double floor_b = double(B) * L * 72 + double(B) * 4 * 2048 * 2 * 72;
    std::printf("%s{\"suite\":\"%s\",\"batch\":%d,\"L\":%d,\"q_len\":%d,\"us\":%.2f,\"cv\":%.4f,\"rot\":%d,"
                "\"floor_bytes\":%.0f,\"floor_us\":%.3f,\"eff_bw_TBs\":%.3f,\"frac_copy_bw\":%.3f,\"attn_splits\":%d,"
                "\"idx_items_per_cta\":%d,\"idx_parts\":%d,\"attn_cluster\":%d,\"prefetch\":%d,\"pdl\":%d,\"ready\":%d,\"attn_warps\":%d,\"attn_lean\":%d,\"warp_pipe\":%d,\"idx_grid\":%d,\"tag\":\"%s\"",
                first ? "" : ",", suite, B, L, q_len, med, std::sqrt(var) / mean, R, floor_b, floor_b / bw * 1e6,
                floor_b / (med * 1e-6) / 1e12, floor_b / (med * 1e-6) / bw, plan.attn_splits, plan.idx_items_per_cta, plan.idx_parts,
                int(plan.attn_cluster), int(plan.prefetch), int(plan.opt.pdl), int(plan.attn_ready), plan.attn_warps,
                int(plan.attn_lean), int(plan.attn_warp_pipe),
                plan.idx_persistent ? plan.idx_grid : -plan.idx_chunks * B, std::getenv("MSA_TAG") ? std::getenv("MSA_TAG") : "");
    if (g_trace) print_trace(trace, 120);
    std::printf("}\n");
    first = false;
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    cudaFree(kc); cudaFree(vc); cudaFree(ikc); cudaFree(dpt); cudaFree(dlens); cudaFree(dtop); cudaFree(dq); cudaFree(dout); cudaFree(ws);
    cudaStreamDestroy(st);
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "full";
    if (std::strcmp(mode, "case") == 0 && argc == 5) {
        g_warm = 1; g_reps = 2;
        bool first = true;
        std::printf("[\n");
        run("case", std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), 4.3e12, first);
        std::printf("]\n");
        return 0;
    }
    if (std::strcmp(mode, "trace") == 0 && argc == 3) {  // trace B:L:q,...: phase timelines (MSA_DECODE_TRACE build)
        g_trace = true;
        mode = "sel";
    }
    if (std::strcmp(mode, "sel") == 0 && argc == 3) {  // sel B:L:q,...: listed cases, full protocol, copy bw 4.25 TB/s
        bool first = true;
        std::printf("[\n");
        for (const char* c = argv[2]; *c;) {
            int B = 0, L = 0, q = 0, n = 0;
            if (std::sscanf(c, "%d:%d:%d%n", &B, &L, &q, &n) != 3) break;
            run("sel", B, L, q, 4.25e12, first);
            c += n;
            if (*c == ',') ++c;
        }
        std::printf("]\n");
        return 0;
    }
    const double bw = copy_bw();
    const bool quick = std::strcmp(mode, "quick") == 0;
    std::printf("{\"copy_bw_TBs\":%.3f,\"cases\":[\n", bw / 1e12);
    bool first = true;
    for (int B : {1, 2, 4}) for (int L : {1024, 4096, 8192, 32768}) run("lowlat", B, L, 1, bw, first);
    for (auto [B, L] : std::vector<std::pair<int, int>>{{1, 8192}, {1, 131072}, {8, 32768}, {32, 32768}, {32, 131072}, {64, 65536}, {8, 524288}})
        run("vllm_cmp_q1", B, L, 1, bw, first);
    for (auto [B, L] : std::vector<std::pair<int, int>>{{32, 32768}, {32, 131072}}) run("vllm_cmp_q8", B, L, 8, bw, first);
    if (!quick)
        for (int B : {8, 32, 64, 128}) for (int L : {1024, 4096, 5120, 10240, 51200, 102400, 204800}) run("decode_q8", B, L, 8, bw, first);
    std::printf("]}\n");
}
