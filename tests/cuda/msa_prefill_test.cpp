// Correctness of the CUDA MSA prefill (indexer + keyed top-k + KV-outer gathered sparse attention) against the
// repository's CPU kernels (src/kernels/cpu: msa_block_scores, msa_select_blocks, sparse_attention in exact mode),
// which implement msa.md independently. Runs only where a GPU is present (otherwise exits 77).
//
// Data: random K, V and index-K rows quantised to NVFP4 by the CPU insert (write_kv_row) into a CPU-layout page
// pool, split into the CUDA cache layout; unused rows of the last page hold large finite garbage (0x77 bytes: codes 6,
// scales 240) so any read of an invisible row shows up. E4M3 queries; the CPU oracle gets their exact float values
// (exact mode then computes the same products as the GPU). Checks, per case and option variant:
//  - top-k rows: local block in the last valid slot, -1 padding, ascending rows when every block fits; otherwise
//    distinct history ids, each scoring within 1.5 quantisation steps of the true k-th history score (msa.md
//    section 3; CPU FP32 block scores, in Q8KV4 numerics for the idx_q8kv4 variants); the share of rows identical
//    to the CPU keyed selection is printed;
//  - outputs: every element finite (outputs poisoned with NaN before the call) and within 3e-3 + 3e-3 |o| of the
//    CPU exact sparse attention over the GPU's own selection (differences: P rounded to FP16, per-block partials
//    stored in FP16, summation order); the attn_q8kv4 variants against q8kv4_prefill_oracle (msa.md's Q8KV4 contract
//    per selected block) within the same bound plus the oracle's rounding slack (for the attn_fp8_scores variants
//    also the slack of a logit error up to 2^-12 of its sum of |products|: Hopper's FP8 accumulation);
//  - a second run through a captured CUDA graph reproduces the first bit for bit.
// --small: the cases compute-sanitizer runs.
#include "kernels/cuda/msa_prefill.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/msa_indexer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

using namespace msa::cuda;
static int g_fail = 0;
#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            std::printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); \
            std::exit(2);                                                           \
        }                                                                           \
    } while (0)
#define EXPECT(c, ...)                                           \
    do {                                                         \
        if (!(c)) {                                              \
            ++g_fail;                                            \
            if (g_fail < 30) {                                   \
                std::printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                std::printf(__VA_ARGS__);                        \
                std::printf("\n");                               \
            }                                                    \
        }                                                        \
    } while (0)

template <class T>
static T* dev(const std::vector<T>& h) {
    T* p;
    CK(cudaMalloc(&p, h.size() * sizeof(T) + 16));
    CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T>
static std::vector<T> host(const T* d, size_t n) {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

struct Variant {
    const char* name;
    MsaPrefillOptions opt;
    const char* same_as = nullptr;  // an earlier variant whose output and top-k this one must equal bit for bit
};

// Oracle of the Q8KV4 prefill attention (msa.md section 5, per selected block as MiniMax's prefill kernel): per
// (token, query head) and selected block, the softmax over the block's visible keys with the block's own max, the
// E4M3-rounded K and V (read_kv_rows with KvRead::e4m3), E4M3(448 p) times V over 448 times the FP32-style sum, and
// the blocks merged by log-sum-exp; double precision apart from the contract's E4M3 roundings. slack[i]: how far
// out[i] can move when a probability that sits within 3e-5 (relative) of an E4M3 rounding boundary rounds the other
// way, as the GPU's exp2 and FP32 logits may differ from these in the last bits.
// acc_eps > 0 (the attn_fp8_scores variants: S summed by FP8 tensor cores): each logit may be off by up to acc_eps
// times sum_c |q_c k_c| / sqrt(128) (E, per key; Emax per block and head); the slack then also covers what that does:
// probabilities within e^(2 Emax) of an E4M3 boundary may round the other way, the block's sum and its outputs move
// by up to a factor e^(+-2 Emax), and its LSE by up to 3 Emax, which moves the merge weights by up to e^(+-6 Emax).
static void q8kv4_prefill_oracle(const msa::KvLayerView& kv, const std::vector<MsaPrefillSeq>& seqs,
                                 const std::vector<int>& pt, int max_blocks, const std::vector<float>& qf,
                                 const std::vector<int>& top, int nq, int nkv, int topk, double acc_eps,
                                 std::vector<double>& out, std::vector<double>& slack) {
    const int G = nq / nkv, npages = (int)pt.size();
    constexpr size_t kRec = 128 * 128;
    // every page's K and V rows, rounded once to E4M3
    std::vector<float> kr((size_t)npages * nkv * kRec), vr(kr.size());
    for (int pg = 0; pg < npages; ++pg)
        for (int g = 0; g < nkv; ++g) {
            msa::cpu::read_kv_rows(kv.k(g), pg, 128, msa::cpu::KvRead::e4m3, &kr[((size_t)pg * nkv + g) * kRec]);
            msa::cpu::read_kv_rows(kv.v(g), pg, 128, msa::cpu::KvRead::e4m3, &vr[((size_t)pg * nkv + g) * kRec]);
        }
    out.assign(qf.size(), 0.0);
    slack.assign(qf.size(), 0.0);
    std::vector<int> tok_seq, tok_pos;
    for (int s = 0; s < (int)seqs.size(); ++s)
        for (int i = 0; i < seqs[s].q_len; ++i) {
            tok_seq.push_back(s);
            tok_pos.push_back(seqs[s].kv_len - seqs[s].q_len + i);
        }
    auto e4m3 = [](double v) { return (double)msa::e4m3_to_float(msa::float_to_e4m3((float)v)); };
    // one (token, KV head) unit: its G heads over its selected blocks, merged by LSE
    auto unit = [&](int t, int g, std::vector<double>& ob, std::vector<double>& slb, std::vector<double>& lse,
                    std::vector<double>& emax) {
        const int s = tok_seq[t], pos = tok_pos[t];
        int nb = 0;
        for (int k = 0; k < topk; ++k) {
            const int b = top[((size_t)t * nkv + g) * topk + k];
            if (b < 0) continue;
            const int vis = std::min(128, pos - b * 128 + 1);
            const size_t rec = ((size_t)pt[(size_t)s * max_blocks + b] * nkv + g) * kRec;
            const float *K = &kr[rec], *V = &vr[rec];
            for (int hh = 0; hh < G; ++hh) {
                const float* q = &qf[((size_t)t * nq + g * G + hh) * 128];
                double x[128], m = -INFINITY, l = 0, E = 0;
                for (int j = 0; j < vis; ++j) {
                    double d = 0, a = 0;
                    for (int c = 0; c < 128; ++c) {
                        d += (double)q[c] * K[j * 128 + c];
                        a += std::fabs((double)q[c] * K[j * 128 + c]);
                    }
                    x[j] = d / std::sqrt(128.0);
                    E = std::max(E, acc_eps * a / std::sqrt(128.0));
                    m = std::max(m, x[j]);
                }
                const double grow = std::exp(2 * E) - 1, win = 3e-5 + grow;
                for (int j = 0; j < vis; ++j) l += std::exp(x[j] - m);
                double* ot = &ob[(nb * G + hh) * 128];
                double* st = &slb[(nb * G + hh) * 128];
                std::fill(ot, ot + 128, 0.0);
                std::fill(st, st + 128, 0.0);
                for (int j = 0; j < vis; ++j) {
                    const double y = 448.0 * std::exp(x[j] - m), r = e4m3(y);
                    const double flip =
                        std::max(std::fabs(e4m3(y * (1 + win)) - r), std::fabs(e4m3(y * (1 - win)) - r));
                    for (int c = 0; c < 128; ++c) {
                        ot[c] += r * V[j * 128 + c] / (448.0 * l);
                        st[c] += (flip * (1 + grow) + r * grow) * std::fabs(V[j * 128 + c]) / (448.0 * l);
                    }
                }
                lse[nb * G + hh] = m + std::log(l);
                emax[nb * G + hh] = E;
            }
            ++nb;
        }
        for (int hh = 0; hh < G; ++hh) {
            double mx = -INFINITY, den = 0, E = 0;
            for (int k = 0; k < nb; ++k) mx = std::max(mx, lse[k * G + hh]);
            for (int k = 0; k < nb; ++k) den += std::exp(lse[k * G + hh] - mx);
            for (int k = 0; k < nb; ++k) E = std::max(E, emax[k * G + hh]);
            const double wgrow = std::exp(6 * E) - 1;
            const size_t o0 = ((size_t)t * nq + g * G + hh) * 128;
            for (int k = 0; k < nb; ++k) {
                const double w = std::exp(lse[k * G + hh] - mx) / den;
                for (int c = 0; c < 128; ++c) {
                    out[o0 + c] += w * ob[(k * G + hh) * 128 + c];
                    slack[o0 + c] += w * ((1 + wgrow) * slb[(k * G + hh) * 128 + c] +
                                          wgrow * std::fabs(ob[(k * G + hh) * 128 + c]));
                }
            }
        }
    };
    const int units = (int)tok_seq.size() * nkv;
    const int nth = (int)std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int th = 0; th < nth; ++th)
        pool.emplace_back([&, th] {
            std::vector<double> ob(topk * G * 128), slb(ob.size()), lse(topk * G), emax(topk * G);
            for (int u = th; u < units; u += nth) unit(u / nkv, u % nkv, ob, slb, lse, emax);
        });
    for (auto& th : pool) th.join();
}

static void run_case(const char* name, int nq, int nkv, int topk, const std::vector<MsaPrefillSeq>& seqs,
                     unsigned seed) {
    std::printf("case %s: nq=%d nkv=%d topk=%d batch=%zu\n", name, nq, nkv, topk, seqs.size());
    const int fails0 = g_fail;
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int B = (int)seqs.size(), G = nq / nkv;
    int max_blocks = 0;
    for (const auto& s : seqs) max_blocks = std::max(max_blocks, (s.kv_len + 127) / 128);
    max_blocks += 1;
    const int npages = B * max_blocks;
    std::vector<int> pt(npages);
    std::iota(pt.begin(), pt.end(), 0);
    std::shuffle(pt.begin(), pt.end(), rng);
    // CPU page pool: per page K heads, V heads, index-K (kv_layout.h), NVFP4.
    msa::KvLayerView kv;
    kv.dtype = msa::KvCacheDtype::NVFP4;
    kv.num_kv_heads = nkv;
    kv.head_dim = 128;
    kv.index_dim = 128;
    kv.page_stride = kv.layer_page_bytes();
    std::vector<std::uint8_t> pool((size_t)npages * kv.page_stride, 0x77);  // unused rows: large finite garbage
    kv.base = pool.data();
    std::vector<float> x(128);
    for (int s = 0; s < B; ++s)
        for (int p = 0; p < seqs[s].kv_len; ++p) {
            const int page = pt[s * max_blocks + p / 128], slot = p % 128;
            for (int h = 0; h < nkv; ++h) {
                for (auto& v : x) v = nd(rng) * 2.f;
                msa::cpu::write_kv_row(kv.k(h), page, slot, x.data());
                for (auto& v : x) v = nd(rng);
                msa::cpu::write_kv_row(kv.v(h), page, slot, x.data());
            }
            for (auto& v : x) v = nd(rng) * 3.f;
            msa::cpu::write_kv_row(kv.index_k(), page, slot, x.data());
        }
    // CUDA layout: K/V [page][head][9216], index-K [page][9216].
    const size_t hb = kPageHeadBytes;
    std::vector<std::uint8_t> hk((size_t)npages * nkv * hb), hv(hk.size()), hik((size_t)npages * hb);
    for (int pg = 0; pg < npages; ++pg) {
        for (int h = 0; h < nkv; ++h) {
            std::memcpy(&hk[((size_t)pg * nkv + h) * hb], kv.k(h).page(pg), hb);
            std::memcpy(&hv[((size_t)pg * nkv + h) * hb], kv.v(h).page(pg), hb);
        }
        std::memcpy(&hik[(size_t)pg * hb], kv.index_k().page(pg), hb);
    }
    int T = 0;
    for (const auto& s : seqs) T += s.q_len;
    std::vector<std::uint8_t> q((size_t)T * nq * 128), iq((size_t)T * nkv * 128);
    for (auto& v : q) v = msa::float_to_e4m3(nd(rng) * 4.f);
    for (auto& v : iq) v = msa::float_to_e4m3(nd(rng) * 4.f);
    std::vector<float> qf(q.size()), iqf(iq.size());
    for (size_t i = 0; i < q.size(); ++i) qf[i] = msa::e4m3_to_float(q[i]);
    for (size_t i = 0; i < iq.size(); ++i) iqf[i] = msa::e4m3_to_float(iq[i]);
    std::vector<msa::AttentionSeq> cs(B);
    for (int s = 0, off = 0; s < B; off += seqs[s].q_len, ++s)
        cs[s] = {off, seqs[s].q_len, seqs[s].kv_len, &pt[(size_t)s * max_blocks]};
    // CPU oracle: FP32 block scores (for the tolerance rule) and the keyed selection, in both numerics: exact (the
    // default indexers) and Q8KV4 (index keys rounded once to E4M3: the idx_q8kv4 indexer).
    std::vector<std::vector<float>> scores_by[2];
    std::vector<std::int32_t> cpu_sel_by[2];
    for (int q8 = 0; q8 < 2; ++q8) {
        const auto numerics = q8 ? msa::AttentionNumerics::q8kv4 : msa::AttentionNumerics::exact;
        scores_by[q8].resize(B);
        for (int s = 0; s < B; ++s) {
            scores_by[q8][s].assign((size_t)seqs[s].q_len * nkv * max_blocks, 0.f);
            msa::cpu::msa_block_scores(kv.index_k(), cs[s], iqf.data(), nkv, 0, seqs[s].q_len, numerics,
                                       scores_by[q8][s].data(), max_blocks);
        }
        cpu_sel_by[q8].resize((size_t)T * nkv * topk);
        msa::cpu::MsaIndexOptions io;
        io.topk = topk;
        io.numerics = numerics;
        msa::cpu::msa_select_blocks(kv.index_k(), cs, iqf.data(), nkv, io, cpu_sel_by[q8].data());
    }

    std::uint8_t* dk = dev(hk);
    std::uint8_t* dv = dev(hv);
    std::uint8_t* dik = dev(hik);
    std::uint8_t* dq = dev(q);
    std::uint8_t* diq = dev(iq);
    int* dpt = dev(pt);
    const size_t nout = (size_t)T * nq * 128, ntop = (size_t)T * nkv * topk;
    float* dout;
    int* dtop;
    CK(cudaMalloc(&dout, nout * 4));
    CK(cudaMalloc(&dtop, ntop * 4));
    MsaGeometry geo{nq, nkv, topk};
    MsaPrefillOptions small_window;
    small_window.window_tokens = 200;
    small_window.idx_blocks_per_item = 3;
    MsaPrefillOptions mma;
    mma.wgmma = false;
    MsaPrefillOptions small_window_mma = small_window;
    small_window_mma.wgmma = false;
    MsaPrefillOptions reg_q = small_window;
    reg_q.idx_kernel = MsaIdxKernel::pass_q;
    MsaPrefillOptions pair = mma;
    pair.attn_queries_per_warp = 2;
    MsaPrefillOptions q8idx;
    q8idx.idx_q8kv4 = true;
    MsaPrefillOptions q8idx_window = small_window;
    q8idx_window.idx_q8kv4 = true;
    MsaPrefillOptions q8attn;
    q8attn.attn_q8kv4 = true;
    MsaPrefillOptions q8both = q8attn;
    q8both.idx_q8kv4 = true;
    q8both.window_tokens = 200;
    MsaPrefillOptions q8s = q8attn;
    q8s.attn_fp8_scores = true;
    MsaPrefillOptions q8s_both = q8both;
    q8s_both.attn_fp8_scores = true;
    // the indexer on converted key tiles (idx_key_tiles; by default with the Q8KV4 indexer), against the same
    // indexer without them: the same MMAs on the same bytes
    MsaPrefillOptions tiles;
    tiles.idx_key_tiles = 2;
    MsaPrefillOptions tiles_window = small_window;
    tiles_window.idx_key_tiles = 2;
    MsaPrefillOptions q8idx_plain = q8idx;
    q8idx_plain.idx_key_tiles = 1;
    MsaPrefillOptions q8idx_window_plain = q8idx_window;
    q8idx_window_plain.idx_key_tiles = 1;
    const Variant variants[] = {
        {"auto (wgmma)", {}},
        {"Q8KV4 attention (FP8 P V)", q8attn},
        {"Q8KV4 attention, FP8 scores", q8s},
        {"Q8KV4 indexer and attention, FP8 scores, window 200", q8s_both},
        {"Q8KV4 indexer and attention, window 200", q8both},
        {"Q8KV4 indexer (FP8 wgmma)", q8idx},
        {"Q8KV4 indexer, window 200, 3 blocks/item", q8idx_window},
        {"window 200, 3 blocks/item", small_window},
        {"wgmma, per-pass query registers, window 200, 3 blocks/item", reg_q},
        {"mma.sync", mma},
        {"mma.sync, window 200, 3 blocks/item", small_window_mma},
        {"mma.sync, 2 queries per warp", pair},
        {"exact indexer on key tiles", tiles, "auto (wgmma)"},
        {"exact indexer on key tiles, window 200, 3 blocks/item", tiles_window, "window 200, 3 blocks/item"},
        {"Q8KV4 indexer without key tiles", q8idx_plain, "Q8KV4 indexer (FP8 wgmma)"},
        {"Q8KV4 indexer without key tiles, window 200, 3 blocks/item", q8idx_window_plain,
         "Q8KV4 indexer, window 200, 3 blocks/item"}};
    std::vector<std::pair<std::vector<float>, std::vector<int>>> results;  // per variant: output, top-k
    for (const Variant& var : variants) {
        const int vf0 = g_fail;
        const int q8 = var.opt.wgmma && var.opt.idx_q8kv4;
        const auto& scores = scores_by[q8];
        const auto& cpu_sel = cpu_sel_by[q8];
        // Hopper's FP8 tensor cores accumulate with about 13-14 significant bits (not FP32; measured: |score error| up
        // to 1.1e-3 of |score|), so with the Q8KV4 indexer scores may differ from the CPU's FP32 sums by up to 2^-8 of
        // the row's largest |score|, and picks may fall that much below the k-th score (the stated tolerance; picks
        // outside the strict 1.5-step rule are counted and printed).
        const double acc_tol = q8 ? std::ldexp(1.0, -8) : 0.0;
        size_t loose_picks = 0;
        auto row_absmax = [&](const float* S, int n) {
            double m = 0;
            for (int b = 0; b < n; ++b) m = std::max(m, (double)std::fabs(S[b]));
            return m;
        };
        MsaPrefillPlan plan = make_prefill_plan(geo, seqs, max_blocks, var.opt);
        void* ws;
        CK(cudaMalloc(&ws, plan.total_bytes));
        CK(cudaMemset(ws, 0xFF, plan.total_bytes));  // poison, then the documented init
        init_prefill_workspace(plan, ws, 0);
        MsaPrefillArgs a{dq, diq, dk, dv, dik, dpt, dout, dtop, ws};
        CK(cudaMemset(dout, 0xFF, nout * 4));
        CK(cudaMemset(dtop, 0x7F, ntop * 4));
        msa_prefill(plan, a, 0);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        const auto out = host(dout, nout);
        const auto top = host(dtop, ntop);
        if (var.same_as) {
            bool found = false;
            for (size_t v = 0; v < results.size(); ++v)
                if (std::strcmp(variants[v].name, var.same_as) == 0 && !results[v].first.empty()) {
                    found = true;
                    EXPECT(results[v].second == top, "%s: top-k differs from %s", var.name, var.same_as);
                    EXPECT(std::memcmp(results[v].first.data(), out.data(), nout * 4) == 0,
                           "%s: output differs from %s", var.name, var.same_as);
                }
            EXPECT(found, "%s: no earlier variant %s", var.name, var.same_as);
        }
        const bool referenced = std::any_of(std::begin(variants), std::end(variants), [&](const Variant& v) {
            return v.same_as && std::strcmp(v.same_as, var.name) == 0;
        });
        results.emplace_back(referenced ? out : std::vector<float>{}, referenced ? top : std::vector<int>{});
        {  // second run: captured in a CUDA graph and replayed
            cudaStream_t st;
            CK(cudaStreamCreate(&st));
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
            msa_prefill(plan, a, st);
            CK(cudaStreamEndCapture(st, &graph));
            CK(cudaGraphInstantiate(&exec, graph, 0));
            CK(cudaMemset(dout, 0xFF, nout * 4));
            CK(cudaMemset(dtop, 0x7F, ntop * 4));
            CK(cudaGraphLaunch(exec, st));
            CK(cudaStreamSynchronize(st));
            const auto o2 = host(dout, nout);
            const auto t2 = host(dtop, ntop);
            EXPECT(t2 == top, "%s: graph replay top-k differs", var.name);
            EXPECT(std::memcmp(o2.data(), out.data(), nout * 4) == 0, "%s: graph replay output differs", var.name);
            CK(cudaGraphExecDestroy(exec));
            CK(cudaGraphDestroy(graph));
            CK(cudaStreamDestroy(st));
        }
        // indexer block scores of the last window (the workspace keeps them) against the CPU FP32 scores
        size_t nscores = 0;
        double max_serr = 0;
        {
            const auto& w = plan.windows.back();
            const auto ws_scores =
                host(reinterpret_cast<const float*>(static_cast<const std::uint8_t*>(ws) + plan.scores_off),
                     (size_t)(w.t1 - w.t0) * nkv * max_blocks);
            for (int t = w.t0; t < w.t1; ++t) {
                int s = 0, i = t;
                while (i >= seqs[s].q_len) i -= seqs[s++].q_len;
                const int local = (seqs[s].kv_len - seqs[s].q_len + i) / 128;
                if (local + 1 <= topk) continue;
                for (int g = 0; g < nkv; ++g) {
                    const double tol_acc = acc_tol * row_absmax(&scores[s][((size_t)i * nkv + g) * max_blocks], local);
                    for (int b = 0; b < local; ++b) {
                        const float got = ws_scores[((size_t)(t - w.t0) * nkv + g) * max_blocks + b];
                        const float ref = scores[s][((size_t)i * nkv + g) * max_blocks + b];
                        const double err = std::fabs((double)got - ref);
                        max_serr = std::max(max_serr, std::isfinite(got) ? err : INFINITY);
                        ++nscores;
                        EXPECT(std::isfinite(got) && err <= 1e-3 * (1.0 + std::fabs(ref)) + tol_acc,
                               "%s: block score t=%d g=%d b=%d: %g vs cpu %g", var.name, t, g, b, got, ref);
                    }
                }
            }
        }
        // top-k rows
        size_t same = 0, sparse_rows = 0;
        for (int s = 0, t = 0; s < B; ++s)
            for (int i = 0; i < seqs[s].q_len; ++i, ++t) {
                const int pos = seqs[s].kv_len - seqs[s].q_len + i, local = pos / 128;
                const int valid = std::min(topk, local + 1);
                for (int g = 0; g < nkv; ++g) {
                    const int* row = &top[((size_t)t * nkv + g) * topk];
                    EXPECT(row[valid - 1] == local, "%s: local not last t=%d g=%d (%d vs %d)", var.name, t, g,
                           row[valid - 1], local);
                    for (int k = valid; k < topk; ++k) EXPECT(row[k] == -1, "%s: padding t=%d", var.name, t);
                    if (local + 1 <= topk) {
                        for (int k = 0; k < valid; ++k) EXPECT(row[k] == k, "%s: ascending t=%d", var.name, t);
                        continue;
                    }
                    ++sparse_rows;
                    const float* S = &scores[s][((size_t)i * nkv + g) * max_blocks];
                    std::vector<float> sorted(S, S + local);
                    std::sort(sorted.rbegin(), sorted.rend());
                    const double kth = sorted[topk - 2], step = ((double)sorted.front() - sorted.back()) / 65534.0;
                    const double acc_slack = acc_tol * row_absmax(S, local);
                    std::vector<int> mine(row, row + topk - 1),
                        ref(&cpu_sel[((size_t)t * nkv + g) * topk], &cpu_sel[((size_t)t * nkv + g) * topk] + topk - 1);
                    std::sort(mine.begin(), mine.end());
                    std::sort(ref.begin(), ref.end());
                    same += mine == ref;
                    for (int k = 0; k + 1 < topk; ++k) {
                        const int b = mine[k];
                        EXPECT(b >= 0 && b < local, "%s: history id %d out of range t=%d g=%d", var.name, b, t, g);
                        if (b < 0 || b >= local) continue;
                        EXPECT(k == 0 || mine[k - 1] != b, "%s: duplicate block t=%d", var.name, t);
                        const double strict = kth - 1.5 * step - 1e-6 * std::fabs(kth);
                        loose_picks += S[b] < strict;
                        EXPECT(S[b] >= strict - acc_slack, "%s: pick %d score %g below k-th %g (step %g) t=%d g=%d",
                               var.name, b, S[b], kth, step, t, g);
                    }
                }
            }
        // attention over the GPU's selection: CPU exact mode, or the Q8KV4 oracle above (with its rounding slack)
        bool rows_ok = true;
        for (size_t i = 0; i < ntop; ++i) rows_ok = rows_ok && top[i] >= -1 && top[i] < max_blocks;
        double max_err = 0, sum_sq = 0, worst = 0;  // worst: largest error / its bound
        auto cpu_exact = [&] {  // the CPU's exact sparse attention over the GPU's selection
            std::vector<float> r(nout);
            msa::cpu::AttentionShape shape{nq, nkv, 128, 1.0f / std::sqrt(128.0f)};
            msa::cpu::sparse_attention(kv, cs, qf.data(), top.data(), topk, shape, msa::AttentionNumerics::exact,
                                       r.data());
            return r;
        };
        if (rows_ok) {
            std::vector<double> ref(nout), slack(nout, 0.0);
            if (var.opt.wgmma && var.opt.attn_q8kv4) {
                // Hopper's FP8 MMAs accumulate with a 13-bit mantissa (reported as a 22-bit float accumulator:
                // 8 exponent, 13 mantissa bits): a logit may be off by 2^-12 of its sum of |products|
                const double acc_eps = var.opt.attn_fp8_scores ? std::ldexp(1.0, -12) : 0.0;
                q8kv4_prefill_oracle(kv, seqs, pt, max_blocks, qf, top, nq, nkv, topk, acc_eps, ref, slack);
            } else {
                const std::vector<float> reff = cpu_exact();
                ref.assign(reff.begin(), reff.end());
            }
            size_t bad = 0;
            for (size_t i = 0; i < nout; ++i) {
                const double err = std::fabs((double)out[i] - ref[i]);
                const double bound = 3e-3 + 3e-3 * std::fabs(ref[i]) + slack[i];
                const bool ok = std::isfinite(out[i]) && err <= bound;
                if (std::isfinite(out[i])) {
                    max_err = std::max(max_err, err);
                    sum_sq += err * err;
                    worst = std::max(worst, err / bound);
                } else
                    max_err = INFINITY;
                if (!ok && ++bad <= 5)
                    EXPECT(ok, "%s: out[t=%zu h=%zu d=%zu] %g vs ref %g", var.name, i / (nq * 128), (i / 128) % nq,
                           i % 128, out[i], ref[i]);
            }
            if (bad > 5) EXPECT(false, "%s: %zu output elements out of tolerance", var.name, bad);
            if (var.opt.wgmma && var.opt.attn_q8kv4 && var.opt.attn_fp8_scores) {
                // the FP8 accumulation of the scores must cost less than the contract's own roundings: the rms of
                // out - oracle below the rms of oracle - exact (CPU exact mode over the same selection)
                const std::vector<float> exact = cpu_exact();
                double contract_sq = 0;
                for (size_t i = 0; i < nout; ++i) contract_sq += (ref[i] - exact[i]) * (ref[i] - exact[i]);
                const double rms_fp8 = std::sqrt(sum_sq / nout), rms_contract = std::sqrt(contract_sq / nout);
                std::printf("  [%s] rms |out - oracle| %.3g, rms |oracle - exact| (the contract's roundings) %.3g\n",
                            var.name, rms_fp8, rms_contract);
                EXPECT(rms_fp8 < rms_contract, "%s: FP8 score error (rms %.3g) not below the contract's (rms %.3g)",
                       var.name, rms_fp8, rms_contract);
            }
        } else {
            EXPECT(false, "%s: top-k rows hold invalid ids; attention not checked", var.name);
        }
        std::printf(
            "  prefill [%s]: windows=%zu items=%zu ws=%.1f MB; %zu block scores of the last window, max err %.3g; "
            "keyed rows equal to CPU %zu/%zu (picks outside the strict rule: %zu); max |out - cpu| = %.3g, rms %.3g, "
            "largest error / bound %.3g; %s\n",
            var.name, plan.windows.size(), plan.items.size() / 8, plan.total_bytes / 1e6, nscores, max_serr, same,
            sparse_rows, loose_picks, max_err, std::sqrt(sum_sq / std::max<size_t>(nout, 1)), worst,
            g_fail == vf0 ? "PASS" : "FAIL");
        (void)G;
        CK(cudaFree(ws));
    }
    std::printf("  case %s\n", g_fail == fails0 ? "PASS" : "FAIL");
    for (void* p : {(void*)dk, (void*)dv, (void*)dik, (void*)dq, (void*)diq, (void*)dpt, (void*)dout, (void*)dtop})
        CK(cudaFree(p));
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--noop") == 0) return 0;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("SKIP: no CUDA device\n");
        return 77;
    }
    const bool small = argc > 1 && std::strcmp(argv[1], "--small") == 0;
    // tiny-mix geometry: 8 query heads, 2 KV heads (GQA 4), top-4
    run_case("tiny 8/2 top4", 8, 2, 4, {{700, 700}, {1, 513}, {90, 1300}, {5, 5}}, 1);
    run_case("real 64/4 top16 small", 64, 4, 16, {{600, 2300}, {129, 129}}, 2);
    if (!small) {
        run_case("real 64/4 top16 from empty 3000", 64, 4, 16, {{3000, 3000}}, 3);
        run_case("real 64/4 top16 batch", 64, 4, 16, {{1000, 4100}, {1, 2200}, {300, 300}, {77, 2100}, {2, 1000}}, 4);
        run_case("GQA8 32/4 top8", 32, 4, 8, {{1500, 2500}, {200, 1200}}, 5);
        run_case("GQA16 16/1 top16 one head", 16, 1, 16, {{900, 2600}}, 6);
        run_case("GQA2 16/8 top4", 16, 8, 4, {{400, 1100}, {33, 700}}, 7);
        // rows of 500-550 blocks: the top-k's threshold path with many keys per lane (and its list fallback
        // whenever more than 32 keys reach the threshold)
        run_case("real 64/4 top16 48 tokens on a 70K prefix", 64, 4, 16, {{48, 70000}}, 8);
    }
    std::printf(g_fail ? "FAILED (%d)\n" : "ALL PASSED\n", g_fail);
    return g_fail ? 1 : 0;
}
