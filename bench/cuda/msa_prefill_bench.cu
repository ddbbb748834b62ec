// MSA prefill benchmark: the prefill set of workloads.md section 3 (8K from empty, 32K from empty, 128K in one
// chunk, 8K chunk on a 32K prefix, 8K chunk on a 120K prefix), one layer (64 q heads, 4 KV heads, top-16, NVFP4
// K/V/index-K, E4M3 queries), KV insert not included. Timing: a CUDA graph of `calls` prefill calls (chosen so a
// replay takes about 100 ms, at least 1), 2 warm-up replays and 10 timed replays, median per call; inputs rotated
// over several page tables and query sets while one set is smaller than 128 MiB (the working set then exceeds 2x
// the 60 MiB L2); planning and input construction excluded. Prints one JSON object.
// Usage: msa_cuda_prefill_bench [set | case q_len kv_len]; MSA_PF_WGMMA=0 runs the mma.sync kernels instead of the
// wgmma ones (default 1); MSA_PF_QPW=1|2 picks the gathered queries per attention
// warp (MsaPrefillOptions::attn_queries_per_warp; default: the library's); MSA_PF_IDX=smem|pass picks the
// wgmma indexer kernel (MsaPrefillOptions::idx_kernel; default smem); MSA_PF_IDX_BLOCKS=n sets
// MsaPrefillOptions::idx_blocks_per_item; MSA_PF_Q8IDX=1 the Q8KV4 (FP8) indexer (MsaPrefillOptions::idx_q8kv4),
// MSA_PF_Q8ATTN=1 the Q8KV4 attention (MsaPrefillOptions::attn_q8kv4), MSA_PF_Q8S=1 with its scores on FP8 MMAs
// too (MsaPrefillOptions::attn_fp8_scores); MSA_PF_KEYTILES=0|1|2 the indexer on converted key tiles
// (MsaPrefillOptions::idx_key_tiles: 0 with the Q8KV4 indexer, 1 off, 2 with either indexer); MSA_PF_WS_GB=x sets
// MsaPrefillOptions::max_workspace to x GB (fewer, larger query windows).
#include "kernels/cuda/msa_prefill.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace msa::cuda;
#define CK(x)                                                                            \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "CUDA %s line %d\n", cudaGetErrorString(e_), __LINE__); \
            std::exit(2);                                                                \
        }                                                                                \
    } while (0)

static double copy_bw() {
    const size_t n = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * n * 10 / (ms * 1e-3);
}

// Fills n bytes of a cache with random NVFP4 page records (codes random, scales in 0x30..0x3F) by doubling copies.
static void fill_pages(std::uint8_t* d, size_t n, std::mt19937& rng) {
    const size_t chunk = std::min(n, 64 * size_t(kPageHeadBytes));
    std::vector<std::uint8_t> h(chunk);
    for (size_t i = 0; i < chunk; ++i) h[i] = (i % kPageHeadBytes) >= 8192 ? 0x30 + (rng() & 15) : rng();
    CK(cudaMemcpy(d, h.data(), chunk, cudaMemcpyHostToDevice));
    for (size_t done = chunk; done < n; done *= 2)
        CK(cudaMemcpy(d + done, d, std::min(done, n - done), cudaMemcpyDeviceToDevice));
}

struct Peer {
    const char* name;
    int q_len, kv_len;
    double vllm_ms, dense_ms, torch_msa_ms;
};
// workloads.md section 3, prefill table (vLLM Triton MSA, dense SDPA, plain PyTorch MSA on the same H200).
static const Peer kPeers[] = {{"8K from empty", 8192, 8192, 4.08, 3.34, 64.3},
                              {"32K from empty", 32768, 32768, 18.86, 51.1, 266.2},
                              {"128K in one chunk", 131072, 131072, 101.8, 854.1, 1240.0},
                              {"8K chunk on a 32K prefix", 8192, 40960, 5.58, 28.9, 71.8},
                              {"8K chunk on a 120K prefix", 8192, 131072, 8.72, 99.3, 92.0}};

static void run(const char* name, int q_len, int kv_len, double bw, const Peer* peer, bool& first) {
    std::mt19937 rng(4242);
    constexpr int nq = 64, nkv = 4, topk = 16;
    const int nb = (kv_len + 127) / 128, max_blocks = nb;
    const double set_bytes = double(nb) * kPageHeadBytes * (2 * nkv + 1) + double(q_len) * (nq + nkv) * 128;
    const int R = std::clamp(int(128.0 * 1048576 / set_bytes) + 1, 1, 8);
    const size_t npages = size_t(nb) * R;
    std::uint8_t *kc, *vc, *ikc;
    CK(cudaMalloc(&kc, npages * nkv * kPageHeadBytes));
    CK(cudaMalloc(&vc, npages * nkv * kPageHeadBytes));
    CK(cudaMalloc(&ikc, npages * kPageHeadBytes));
    fill_pages(kc, npages * nkv * kPageHeadBytes, rng);
    fill_pages(vc, npages * nkv * kPageHeadBytes, rng);
    fill_pages(ikc, npages * kPageHeadBytes, rng);
    std::vector<int> pt(npages);
    for (size_t i = 0; i < npages; ++i) pt[i] = int(i);
    std::shuffle(pt.begin(), pt.end(), rng);
    int* dpt;
    CK(cudaMalloc(&dpt, pt.size() * 4));
    CK(cudaMemcpy(dpt, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice));
    const size_t nqb = size_t(q_len) * nq * 128, niq = size_t(q_len) * nkv * 128;
    std::uint8_t *dq, *diq;
    CK(cudaMalloc(&dq, nqb * R));
    CK(cudaMalloc(&diq, niq * R));
    {
        // E4M3 magnitudes 0.5..3.5 with random signs: a 4 MiB random pattern (an odd number of bytes, so rows do
        // not repeat in step with the head layout), replicated on the device
        const size_t pat = 4194301;
        std::vector<std::uint8_t> h(pat);
        for (auto& x : h) x = 0x30 + (rng() % 24) + (rng() & 0x80);
        auto fill = [&](std::uint8_t* d, size_t n) {
            CK(cudaMemcpy(d, h.data(), std::min(n, pat), cudaMemcpyHostToDevice));
            for (size_t done = std::min(n, pat); done < n; done *= 2)
                CK(cudaMemcpy(d + done, d, std::min(done, n - done), cudaMemcpyDeviceToDevice));
        };
        fill(dq, nqb * R);
        fill(diq, niq * R);
    }
    float* dout;
    int* dtop;
    void* ws;
    CK(cudaMalloc(&dout, nqb * 4));
    CK(cudaMalloc(&dtop, size_t(q_len) * nkv * topk * 4));
    MsaGeometry geo{nq, nkv, topk};
    const MsaPrefillSeq seq{q_len, kv_len};
    const auto t_plan0 = std::chrono::steady_clock::now();
    MsaPrefillOptions opt;
    if (const char* qpw = std::getenv("MSA_PF_QPW")) opt.attn_queries_per_warp = std::atoi(qpw);
    if (const char* wg = std::getenv("MSA_PF_WGMMA")) opt.wgmma = std::atoi(wg) != 0;
    if (const char* q8 = std::getenv("MSA_PF_Q8IDX")) opt.idx_q8kv4 = std::atoi(q8) != 0;
    if (const char* q8 = std::getenv("MSA_PF_Q8ATTN")) opt.attn_q8kv4 = std::atoi(q8) != 0;
    if (const char* q8 = std::getenv("MSA_PF_Q8S")) opt.attn_fp8_scores = std::atoi(q8) != 0;
    if (const char* kt = std::getenv("MSA_PF_KEYTILES")) opt.idx_key_tiles = std::atoi(kt);
    if (const char* ib = std::getenv("MSA_PF_IDX_BLOCKS")) opt.idx_blocks_per_item = std::atoi(ib);
    if (const char* ws = std::getenv("MSA_PF_WS_GB")) opt.max_workspace = static_cast<std::size_t>(std::atof(ws) * 1e9);
    if (const char* ik = std::getenv("MSA_PF_IDX")) {
        const std::string v = ik;
        opt.idx_kernel = v == "pass" ? msa::cuda::MsaIdxKernel::pass_q : msa::cuda::MsaIdxKernel::smem_q;
    }
    MsaPrefillPlan plan = make_prefill_plan(geo, {&seq, 1}, max_blocks, opt);
    const double plan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_plan0).count();
    CK(cudaMalloc(&ws, plan.total_bytes));
    init_prefill_workspace(plan, ws, 0);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    auto args = [&](int c) {
        const int r = c % R;
        return MsaPrefillArgs{dq + nqb * r, diq + niq * r, kc, vc, ikc, dpt + size_t(r) * nb, dout, dtop, ws};
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    // one eager call (warms up, sizes the graph)
    msa_prefill(plan, args(0), st);
    CK(cudaEventRecord(e0, st));
    msa_prefill(plan, args(1), st);
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float eager_ms;
    CK(cudaEventElapsedTime(&eager_ms, e0, e1));
    const int calls = std::clamp(int(100.0 / std::max(eager_ms, 0.01f)), 1, 120);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int c = 0; c < calls; ++c) msa_prefill(plan, args(c), st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(ge, st));
    std::vector<double> ms;
    for (int i = 0; i < 10; ++i) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t / calls);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    double mean = 0, var = 0;
    for (double x : ms) mean += x / ms.size();
    for (double x : ms) var += (x - mean) * (x - mean) / ms.size();
    // Byte floor (NVFP4): every K, V and index-K row of the sequence once, the E4M3 queries once, the output once in
    // BF16. Modelled traffic of this implementation: index-K blocks per indexer item, queries per item, block scores
    // written and read, K+V blocks per attention chunk, partial O (FP16) and LSE written and read, FP32 output.
    const double T = q_len, picks = T * nkv * topk;
    const double floor_b = double(kv_len) * (2 * nkv + 1) * 72 + T * (nq + nkv) * 128 + T * nq * 128 * 2;
    double idx_blocks = 0;
    for (size_t i = 0; i < plan.items.size(); i += 8) idx_blocks += plan.items[i + 4] - plan.items[i + 3];
    const double n_items = plan.items.size() / 8.0;
    const double model_b = idx_blocks * kPageHeadBytes + n_items * 128 * 128 +
                           2 * T * nkv * double(max_blocks) / 2 * 4 +
                           (picks / 16 + plan.num_lists()) * 2 * kPageHeadBytes + picks * 16 * 128 * 2 * 2 +
                           picks * 16 * 4 * 2 + T * nq * 128 * 4 + T * nq * 128;
    // FLOPs: indexer over the causal history (T x (prefix + T/2) keys, 4 heads, 128 dims, 2 FLOP), attention 16
    // blocks x 128 keys per (query, KV head) for 16 heads (QK and PV: 4 FLOP per key and dim).
    const double prefix = kv_len - q_len;
    const double flops = T * (prefix + T / 2) * nkv * 128 * 2 + T * nkv * double(topk) * 128 * (nq / nkv) * 128 * 4;
    std::printf(
        "%s{\"case\":\"%s\",\"q_len\":%d,\"kv_len\":%d,\"ms\":%.4f,\"cv\":%.4f,\"calls_per_graph\":%d,\"rot\":%d,"
        "\"eager_ms\":%.4f,\"plan_ms\":%.3f,\"windows\":%zu,\"workspace_MB\":%.1f,"
        "\"floor_bytes\":%.0f,\"floor_ms\":%.4f,\"model_bytes\":%.0f,\"model_bytes_over_floor\":%.2f,"
        "\"eff_bw_TBs_floor\":%.3f,\"frac_copy_bw_floor\":%.4f,\"frac_copy_bw_model\":%.4f,\"tflops\":%.1f,"
        "\"attn_qpw\":%d",
        first ? "" : ",\n", name, q_len, kv_len, med, std::sqrt(var) / mean, calls, R, eager_ms, plan_ms,
        plan.windows.size(), plan.total_bytes / 1e6, floor_b, floor_b / bw * 1e3, model_b, model_b / floor_b,
        floor_b / (med * 1e-3) / 1e12, floor_b / (med * 1e-3) / bw, model_b / (med * 1e-3) / bw,
        flops / (med * 1e-3) / 1e12, plan.attn_qpw);
    if (peer)
        std::printf(
            ",\"vllm_ms\":%.2f,\"dense_sdpa_ms_workloads\":%.2f,\"torch_msa_ms_workloads\":%.1f,"
            "\"speedup_vs_vllm\":%.2f",
            peer->vllm_ms, peer->dense_ms, peer->torch_msa_ms, peer->vllm_ms / med);
    std::printf("}");
    first = false;
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    cudaFree(kc);
    cudaFree(vc);
    cudaFree(ikc);
    cudaFree(dpt);
    cudaFree(dq);
    cudaFree(diq);
    cudaFree(dout);
    cudaFree(dtop);
    cudaFree(ws);
    cudaStreamDestroy(st);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "set";
    const double bw = copy_bw();
    std::printf("{\"copy_bw_TBs\":%.3f,\"cases\":[\n", bw / 1e12);
    bool first = true;
    if (std::strcmp(mode, "case") == 0 && argc == 4) {
        run("case", std::atoi(argv[2]), std::atoi(argv[3]), bw, nullptr, first);
    } else {
        for (const Peer& p : kPeers) run(p.name, p.q_len, p.kv_len, bw, &p, first);
    }
    std::printf("\n]}\n");
}
