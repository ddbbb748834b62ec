// Internal glue between msa_decode.cu (tensor-core path, plan, dispatch) and msa_decode_simt.cu (SIMT kernels).
#pragma once
#include "msa_decode.h"

#include <stdexcept>
#include <string>

namespace msa::cuda::detail {

inline void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("msa::cuda: ") + cudaGetErrorString(e));
}

// SIMT reference stages. Scores: [batch][rows][max_blocks] FP32. Partials: one per (query, kv head, top-k slot).
void launch_simt_indexer(const MsaDecodePlan& p, const MsaDecodeArgs& a, float* scores, cudaStream_t stream);
void launch_simt_attention(const MsaDecodePlan& p, const MsaDecodeArgs& a, float* po, float* pl, cudaStream_t stream);

}  // namespace msa::cuda::detail
