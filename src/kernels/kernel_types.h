// Types shared by every compute backend (CPU in cpu/, CUDA in cuda/): how a batch of sequences is described to the
// attention kernels, and the numerics modes the kernels offer.
#pragma once

#include <cstdint>

namespace msa {

// One sequence's share of an attention call. Its rows in the batch's token-major arrays are
// [q_offset, q_offset + q_len); query i sits at position kv_len - q_len + i (bottom-right aligned, msa.md section 4).
struct AttentionSeq {
    std::int64_t q_offset = 0;
    std::int32_t q_len = 0;
    std::int32_t kv_len = 0;
    const std::int32_t* pages = nullptr;  // physical page of each logical block; covers kv_len tokens
};

inline std::int32_t query_position(const AttentionSeq& s, std::int32_t i) { return s.kv_len - s.q_len + i; }

// Attention and indexer numerics (msa.md section 5).
enum class AttentionNumerics {
    exact,  // FP32 Q and index-Q, K/V/index-K dequantised exactly, FP32 softmax: the parity mode
    q8kv4,  // MiniMax's quantised contract: E4M3 Q, K/V rounded once to E4M3, E4M3(P*448) for PV
};

// MSA top-k ranking (msa.md section 3).
enum class TopkMode {
    keyed,  // MiniMax's 16-bit quantised key (the default)
    exact,  // FP32 scores, ties to the lower block id
};

// Activations of the GEMMs (see cpu/linear.h for what each promises).
enum class ActivationMode {
    exact,  // FP32 activations
    int8,   // NVFP4 weights: int8 activations per 16 values (fast serving mode)
};

}  // namespace msa
