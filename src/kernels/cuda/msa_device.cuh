// Device helpers shared by the CUDA MSA kernels (decode: msa_decode.cu, prefill: msa_prefill.cu): E4M3/E2M1
// conversions, f16x2 arithmetic, mma.sync, cp.async, programmatic dependent launch, warp reductions.
#pragma once
#include <cuda_fp16.h>
#include <math_constants.h>
#include <cstdint>

#include "kernels/cuda/fp4_bits.h"

namespace msa::cuda::detail {

constexpr float kLog2eOverSqrtD = 0.12751743074f;  // log2(e) / sqrt(128)

// ---------------------------------------------------------------- small device helpers
__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
    return __byte_perm(a, b, sel);
}
// Two E4M3 bytes (low 16 bits of v) -> f16x2, exact.
__device__ __forceinline__ std::uint32_t e4m3x2_to_h2(std::uint32_t v) {
    std::uint32_t r;
    const unsigned short lo = static_cast<unsigned short>(v & 0xFFFFu);
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(lo));
    return r;
}
// Two f16x2 words -> four E4M3 bytes (a's pair in the low 16 bits), each rounded to nearest even and saturated to
// +-448 (the one E4M3 rounding of formats.md / msa.md section 5's Q8KV4 contract; exact for values E4M3 can hold).
__device__ __forceinline__ std::uint32_t h2x2_to_e4m3x4(std::uint32_t a, std::uint32_t b) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(lo) : "r"(a));
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(hi) : "r"(b));
    return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}
// f16x2 -> the same two values rounded once to E4M3 (saturating), back as f16x2 (exact).
__device__ __forceinline__ std::uint32_t h2_round_e4m3(std::uint32_t a) {
    unsigned short e;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(e) : "r"(a));
    return e4m3x2_to_h2(e);
}
// Four floats -> four E4M3 bytes (x0 lowest), each rounded once from FP32 (nearest even, saturating).
__device__ __forceinline__ std::uint32_t f32x4_to_e4m3x4(float x0, float x1, float x2, float x3) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x1), "f"(x0));  // first source -> upper byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x3), "f"(x2));
    return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}
// 2^x by one MUFU.EX2 (exp2f adds range fix-ups around it: a compare and two multiplies per value). Results below
// 2^-126 flush to zero, 2^-inf is 0; used for softmax probabilities that are rounded to FP16 afterwards.
__device__ __forceinline__ float fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ std::uint32_t hmul2(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
constexpr std::uint32_t kH2x128 = 0x58005800u;  // f16x2 (128, 128)
// Powers of two passed as kernel parameters: with MSA_FP4_SHIFTS=0 the shifts in fp4x8 compile to IMAD (FMA pipe)
// instead of SHF/LOP3 on the integer ALU pipe.
struct Mul {
    std::uint32_t x2, x16, x32, x256, x512, x4096, hi_x2p29;
};
constexpr Mul kMul{2u, 16u, 32u, 256u, 512u, 4096u, 1u << 29};
// Eight E2M1 nibbles n0..n7 of x -> four f16x2 P[i] = (n_i, n_{i+4}) * 2^-14, exact (the 0.5 code is an FP16
// subnormal): sign to bit 15/31, exponent-mantissa bits to 9-11/25-27 (fp4_bits.h, MSA_FP4_DECODE: shifts or
// byte table). MSA_FP4_SHIFTS=1 (default) writes the operations with constants and lets the compiler pick the pipes;
// 0 forces the shift version onto IMAD through the kernel-parameter multipliers. Measured on the H200 (docs/cuda-notes.md, v3): the constant shifts are
// 2-5% faster on every benchmark case.
#ifndef MSA_FP4_SHIFTS
#define MSA_FP4_SHIFTS 1
#endif
__device__ __forceinline__ void fp4x8(std::uint32_t x, [[maybe_unused]] const Mul& m, std::uint32_t (&P)[4]) {
#if MSA_FP4_SHIFTS
    fp4::decode(x, P);  // MSA_FP4_DECODE picks the way (fp4_bits.h)
#else
    P[3] = (x & 0x80008000u) | (__umulhi(x, m.hi_x2p29) & 0x0E000E00u);
    P[2] = ((x * m.x16) & 0x80008000u) | ((x * m.x2) & 0x0E000E00u);
    P[1] = ((x * m.x256) & 0x80008000u) | ((x * m.x32) & 0x0E000E00u);
    P[0] = ((x * m.x4096) & 0x80008000u) | ((x * m.x512) & 0x0E000E00u);
#endif
}
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four 8 x 8 FP16 matrices from shared memory (lanes 8i..8i+7 give matrix i's row addresses), in mma fragment order.
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const void* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ std::uint32_t pack_h2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// Bulk prefetch of `bytes` (a multiple of 16, 16-byte aligned source) into L2 by the TMA unit (sm_90).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
// ---------------------------------------------------------------- mbarriers and bulk copies (sm_90)
// A shared-memory mbarrier's phase completes when `count` arrivals and every byte announced by expect_tx have
// arrived; waiters pass the parity of the phase they wait for (0 for the first, then alternating).
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init_cta(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Makes initialised barriers visible to the cluster's threads (before the CTA or cluster barrier).
__device__ __forceinline__ void fence_mbar_init_cluster() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
}
// One thread: announces `bytes` on `bar` and copies them from global memory into shared memory by the TMA unit
// (16-byte aligned addresses, a multiple of 16 bytes); the barrier's phase completes when they have landed.
__device__ __forceinline__ void bulk_copy_to_smem(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    mbar_arrive_expect_tx(bar, bytes);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}
__device__ __forceinline__ void pdl_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// ---------------------------------------------------------------- wgmma (sm_90a warpgroup MMA)
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait1() {  // all but the most recent committed group have completed
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
// Generic-proxy writes to shared memory (st.shared) -> reads by wgmma (async proxy); before the CTA barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Keeps the compiler from moving uses of accumulator registers across a wgmma wait (they are written asynchronously).
template <int N>
__device__ __forceinline__ void wgmma_fence_regs(float (&d)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}
// The same for the A fragments of register-A wgmmas: their registers are not reused before the wgmmas have completed.
template <int N>
__device__ __forceinline__ void wgmma_fence_regs(std::uint32_t (&a)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[j][e])::"memory");
}
// Shared-memory matrix descriptor without swizzle: operand of 8-row x 16-byte core matrices (each 128 contiguous
// bytes), `lead` bytes between core matrices along K and `stride` bytes between them along M/N (the convention
// measured in run H of session 5: docs/cuda-notes.md section 16).
__device__ __forceinline__ std::uint64_t wg_desc_noswizzle(const void* smem_ptr, unsigned lead, unsigned stride) {
    const auto addr = static_cast<std::uint64_t>(__cvta_generic_to_shared(smem_ptr));
    return ((addr & 0x3FFFFu) >> 4) | (std::uint64_t{lead >> 4} << 16) | (std::uint64_t{stride >> 4} << 32);
}
// The 64 accumulator operands of an m64n128 wgmma ("+f" constraints, d[j][e] = operand 4 j + e).
#define MSA_WG_ACC64(d)                                                                                                \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),          \
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),      \
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),      \
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),      \
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),      \
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),    \
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),              \
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),              \
        "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),              \
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define MSA_WG_ACC64_LIST                                                                                              \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
    "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,"    \
    "%57,%58,%59,%60,%61,%62,%63}"
// D (64 x 128, FP32; this thread's 64 values as 16 groups of 4 in the mma.sync m16n8 order: d[j] = rows r, r + 8 of
// columns 8j + 2c, + 1) (+)= A (64 x 16 FP16, registers: this warp's 16 rows as the mma.sync m16n8k16 A fragment) x
// B (16 x 128 FP16, shared memory, K-major, descriptor). accumulate = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[16][4], const std::uint32_t (&a)[4], std::uint64_t desc,
                                                     int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WG_ACC64_LIST
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : MSA_WG_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                 : "memory");
}
// The same with A (64 x 16 FP16) from shared memory too (descriptor desc_a, K-major).
__device__ __forceinline__ void wgmma_m64n128k16_f16_ss(float (&d)[16][4], std::uint64_t desc_a, std::uint64_t desc_b,
                                                        int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WG_ACC64_LIST
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : MSA_WG_ACC64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)
                 : "memory");
}
// D (64 x 128, FP32) (+)= A (64 x 32 E4M3) x B (32 x 128 E4M3), both from shared memory (K-major descriptors; FP8
// wgmma has no transposed forms).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_ss(float (&d)[16][4], std::uint64_t desc_a, std::uint64_t desc_b,
                                                         int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " MSA_WG_ACC64_LIST
                 ", %64, %65, p, 1, 1;\n}\n"
                 : MSA_WG_ACC64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)
                 : "memory");
}
// D (+)= A (64 x 32 E4M3, registers: this warp's 16 rows as the mma.sync m16n8k32 A fragment) x B (32 x 128 E4M3,
// shared memory, K-major).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[16][4], const std::uint32_t (&a)[4],
                                                      std::uint64_t desc, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " MSA_WG_ACC64_LIST
                 ", {%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
                 : MSA_WG_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                 : "memory");
}
#undef MSA_WG_ACC64
#undef MSA_WG_ACC64_LIST
// D = A B over K = 128 (eight k16 steps: A fragments a[ks], B at desc advanced by step_bytes per step), issued and
// waited for; D is overwritten.
__device__ __forceinline__ void wgmma_m64n128k128_f16(float (&d)[16][4], const std::uint32_t (&a)[8][4],
                                                      std::uint64_t desc, unsigned step_bytes) {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) wgmma_m64n128k16_f16(d, a[ks], desc + ks * (step_bytes >> 4), ks > 0);
    wgmma_commit();
    wgmma_wait0();
    wgmma_fence_regs(d);
}
// The same over K = 128 with E4M3 operands (four k32 steps: a[ks], B advanced by step_bytes per step).
__device__ __forceinline__ void wgmma_m64n128k128_e4m3(float (&d)[16][4], const std::uint32_t (&a)[4][4],
                                                       std::uint64_t desc, unsigned step_bytes) {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_m64n128k32_e4m3(d, a[ks], desc + ks * (step_bytes >> 4), ks > 0);
    wgmma_commit();
    wgmma_wait0();
    wgmma_fence_regs(d);
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_min(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---------------------------------------------------------------- keyed top-k pieces (msa.md section 3)
// 16 block scores per lane (blocks base + lane + 32 k; n >= 1), -inf past n. A block's score is the maximum over
// the page parts that different warps scored: one vector load per block (the parts of a block are contiguous and
// aligned), addresses clamped into the row, every load issued before any is used. (The earlier per-block conditional
// loads each waited out an L2 round trip before the next was issued: 15 us of top-k at 1 x 128K in the phase
// trace of session 6, docs/cuda-notes.md section 17.)
template <class V>
__device__ __forceinline__ void load_score_vectors(const float* sc, int base, int n, int lane, float (&v)[16]) {
    V x[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) x[k] = __ldcg(reinterpret_cast<const V*>(sc) + min(base + lane + 32 * k, n - 1));
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        if constexpr (sizeof(V) == 16) v[k] = fmaxf(fmaxf(x[k].x, x[k].y), fmaxf(x[k].z, x[k].w));
        else if constexpr (sizeof(V) == 8) v[k] = fmaxf(x[k].x, x[k].y);
        else v[k] = x[k];
        if (base + lane + 32 * k >= n) v[k] = -CUDART_INF_F;
    }
}
// The row's 16-bit quantiser from its warp-reduced history min and max: key = (q << 16) | (~block & 0xFFFF).
struct KeyedQuant {
    float scale, bias;
};
__device__ __forceinline__ KeyedQuant keyed_quant(float mn, float mx) {
    float scale = 65534.0f / (mx - mn);
    if (!isfinite(scale)) scale = 0.f;
    return {scale, fmaf(-mn, scale, 1.5f)};
}
__device__ __forceinline__ std::uint32_t keyed_key(float v, const KeyedQuant& q, int block) {
    const float f = fminf(fmaxf(fmaf(v, q.scale, q.bias), 0.f), 65535.f);
    return (static_cast<std::uint32_t>(f) << 16) | (~static_cast<std::uint32_t>(block) & 0xFFFFu);
}
// Inserts x into a lane's descending list of its 15 largest keys.
__device__ __forceinline__ void top15_insert(std::uint32_t (&top)[15], std::uint32_t x) {
#pragma unroll
    for (int j = 0; j < 15; ++j) {
        const std::uint32_t hi = max(top[j], x);
        x = min(top[j], x);
        top[j] = hi;
    }
}
// Sorts 16 keys descending in registers (bitonic network: 10 stages of 8 independent compare-exchanges, against 16
// dependent 15-step insertions for the same list; the chain was 1.3 us of the decode top-k at batch 1).
__device__ __forceinline__ void sort16_desc(std::uint32_t (&x)[16]) {
#pragma unroll
    for (int size = 2; size <= 16; size <<= 1)
#pragma unroll
        for (int stride = size >> 1; stride > 0; stride >>= 1)
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                const int j = i ^ stride;
                if (j > i) {
                    const bool desc = (i & size) == 0 || size == 16;  // the last merge sorts the whole list descending
                    const std::uint32_t a = x[i], b = x[j];
                    x[i] = desc ? max(a, b) : min(a, b);
                    x[j] = desc ? min(a, b) : max(a, b);
                }
            }
}
// Merges a descending list of 16 keys into a lane's descending top-15 list (the 15 largest of both stay).
__device__ __forceinline__ void top15_merge(std::uint32_t (&top)[15], const std::uint32_t (&x)[16]) {
    std::uint32_t c[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) c[i] = max(i < 15 ? top[i] : 0u, x[15 - i]);  // the 16 largest, bitonic
#pragma unroll
    for (int stride = 8; stride > 0; stride >>= 1)
#pragma unroll
        for (int i = 0; i < 16; ++i)
            if ((i & stride) == 0) {
                const std::uint32_t a = c[i], b = c[i + stride];
                c[i] = max(a, b);
                c[i + stride] = min(a, b);
            }
#pragma unroll
    for (int i = 0; i < 15; ++i) top[i] = c[i];
}
// One chunk of a row's scores as load_score_vectors gives them (16 per lane: blocks base + lane + 32 k): the min and
// max of those below n folded into mn and mx (the keyed quantiser's first pass) ...
__device__ __forceinline__ void chunk_min_max(const float (&v)[16], int base, int n, int lane, float& mn, float& mx) {
#pragma unroll
    for (int k = 0; k < 16; ++k)
        if (base + lane + 32 * k < n) {
            mn = fminf(mn, v[k]);
            mx = fmaxf(mx, v[k]);
        }
}
// ... and their keys (0 past n: below every real key), sorted descending (second pass) ...
__device__ __forceinline__ void sorted_chunk_keys(const float (&v)[16], int base, int n, int lane, const KeyedQuant& kq,
                                                  std::uint32_t (&x)[16]) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const int i = base + lane + 32 * k;
        x[k] = i < n ? keyed_key(v[k], kq, i) : 0u;
    }
    sort16_desc(x);
}
// ... and merged into the lane's top-15 list.
__device__ __forceinline__ void merge_keyed_chunk(std::uint32_t (&top)[15], const float (&v)[16], int base, int n,
                                                  int lane, const KeyedQuant& kq) {
    std::uint32_t x[16];
    sorted_chunk_keys(v, base, n, lane, kq, x);
    top15_merge(top, x);
}
// The first chunk into an empty list: the sorted keys' first 15 (what merge_keyed_chunk gives for an all-zero list).
__device__ __forceinline__ void first_keyed_chunk(std::uint32_t (&top)[15], const float (&v)[16], int n, int lane,
                                                  const KeyedQuant& kq) {
    std::uint32_t x[16];
    sorted_chunk_keys(v, 0, n, lane, kq, x);
#pragma unroll
    for (int j = 0; j < 15; ++j) top[j] = x[j];
}
// The warp's 15 largest keys from the lanes' lists: lane j < k - 1 gets the block id of the j-th largest key; other
// lanes keep `mine`. k - 1 rounds of a warp max over the lists' heads; the winner's list shifts. (A butterfly of list
// merges, 5 dependent steps instead of 15 rounds, measured no faster in session 15's runs 4-5: 32 x 128K +0.7 us.)
__device__ __forceinline__ int top15_pick(std::uint32_t (&top)[15], int k, int lane, int mine) {
    for (int j = 0; j + 1 < k; ++j) {
        const std::uint32_t best = __reduce_max_sync(0xffffffffu, top[0]);
        if (top[0] == best) {
#pragma unroll
            for (int q = 0; q < 14; ++q) top[q] = top[q + 1];
            top[14] = 0;
        }
        if (lane == j) mine = static_cast<int>(~best & 0xFFFFu);
    }
    return mine;
}

}  // namespace msa::cuda::detail
