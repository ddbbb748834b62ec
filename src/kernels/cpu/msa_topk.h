// MSA top-k block selection for one (query, index head) row (msa.md section 3).
//
// Input: the block scores of blocks 0..local (local = pos / 128; scores[local] is the local block's own score).
// Output: k int32 entries. When local + 1 <= k: 0, 1, ..., local, then -1. Otherwise k - 1 history blocks
// (ascending block id) followed by the local block. History blocks are ranked by
//  - keyed (default, MiniMax's inference kernel): a 16-bit quantised score over the row's history min..max with the
//    block id in the low 16 bits, so ties (in the quantised score) go to the lower id;
//  - exact: the FP32 score, ties to the lower id.
// NaN scores rank lowest in both modes.
#pragma once

#include "kernels/kernel_types.h"

#include <cstdint>

namespace msa::cpu {

using msa::TopkMode;

inline constexpr int kMaxMsaBlocks = 8192;  // 1M tokens per row (msa.md section 3)

void select_top_blocks(const float* scores, std::int32_t local, int k, TopkMode mode, std::int32_t* out);

// The keyed rank of each history score of a row (what `keyed` sorts by, descending); exposed for tests.
// keys: [local] entries for blocks 0..local-1.
void keyed_scores(const float* scores, std::int32_t local, std::uint32_t* keys);

}  // namespace msa::cpu
