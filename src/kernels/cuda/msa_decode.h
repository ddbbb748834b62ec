// Hopper (sm_90a) CUDA kernels for MSA decode with an NVFP4 KV cache (issue 7).
// Cache layout (formats.md section 5): per (page, kv head) one 9216-byte record: 128 tokens x 64 bytes of E2M1
// pairs (element 2i low nibble), then 128 tokens x 8 E4M3 scales (one per 16 channels). K and V caches are
// [num_pages][4 kv heads][9216 B]; the index-K cache is [num_pages][9216 B]. A page holds positions
// [128 b, 128 b + 127] of the sequence whose page table maps logical block b to it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace msa::cuda {

inline constexpr int kHeadDim = 128;
inline constexpr int kBlock = 128;
inline constexpr int kPageHeadBytes = kBlock * 64 + kBlock * 8;  // 9216

struct MsaGeometry {
    int num_q_heads = 64;
    int num_kv_heads = 4;   // == number of index heads
    int topk = 16;          // sparse_topk_blocks (<= 16)
};

// KV insert: Gemma RMSNorm per head (x * rsqrt(mean x^2 + eps) * (1 + w)) on K and index-K, partial NeoX RoPE
// (rotary_dim 64, pairs (i, i+32), inv_freq = theta^(-i/32)) on K and index-K, NVFP4 quantisation (formats.md 3)
// of K, V and index-K. Inputs FP32: k,v [T][kv_heads][128], ik [T][128]; positions[T]; seq_of_token[T] picks the
// row of page_table [batch][max_blocks] that maps pos/128 to a physical page.
struct KvInsertArgs {
    const float* k; const float* v; const float* ik;
    const float* k_norm_w; const float* ik_norm_w;
    const int* positions; const int* seq_of_token;
    const int* page_table; int max_blocks;
    int num_tokens; int num_kv_heads;
    float eps = 1e-6f; float rope_theta = 10000.0f;
    std::uint8_t* k_cache; std::uint8_t* v_cache; std::uint8_t* ik_cache;
};
void kv_insert(const KvInsertArgs& a, cudaStream_t stream);

// Decode plan: built on the host outside graph capture; fixes every grid so the launches are capturable.
struct MsaDecodePlan {
    MsaGeometry geo;
    int batch = 0;
    int q_len = 1;           // queries per request (1..16)
    int max_blocks = 0;      // page-table row length; upper bound on blocks per sequence (<= 8192)
    // Workspace (device), sizes from workspace_bytes(); carved by make_plan's caller-provided buffer.
    std::size_t scores_off = 0, partial_o_off = 0, partial_lse_off = 0, total_bytes = 0;
};
MsaDecodePlan make_decode_plan(const MsaGeometry& geo, int batch, int q_len, int max_blocks);

struct MsaDecodeArgs {
    const std::uint8_t* q;         // E4M3 [batch][q_len][num_q_heads][128]
    const std::uint8_t* iq;        // E4M3 [batch][q_len][num_kv_heads][128]
    const std::uint8_t* k_cache; const std::uint8_t* v_cache; const std::uint8_t* ik_cache;
    const int* page_table;         // [batch][max_blocks]
    const int* seq_lens;           // [batch] kv_len including the q_len new tokens
    float* out;                    // FP32 [batch][q_len][num_q_heads][128]
    int* topk_out;                 // [batch][q_len][num_kv_heads][topk] logical block ids (-1 padded, local last)
    void* workspace;               // plan.total_bytes
};
// Three launches: indexer block scores, keyed top-k, sparse attention per selected page (split-KV, one split per
// page) + LSE merge (four in all). Exact numerics: Q and index-Q E4M3 decoded exactly, K/V/index-K = e2m1*scale.
void msa_decode(const MsaDecodePlan& plan, const MsaDecodeArgs& a, cudaStream_t stream);

}  // namespace msa::cuda
