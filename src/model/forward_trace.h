// Optional internals of a forward step, for parity tests and debugging: the MSA blocks each query selected.
#pragma once

#include <cstdint>
#include <vector>

namespace msa {

struct ForwardTrace {
    // Set before the call to ask for the selections.
    bool record_selected_blocks = false;
    // Filled by the call: per layer, [total_new_tokens][num_kv_heads][topk] block ids in batch token order
    // (local block in the last valid slot, -1 padding, msa.md section 3); empty for dense-attention layers.
    std::vector<std::vector<std::int32_t>> selected_blocks;
    int topk = 0;
    int num_kv_heads = 0;
};

}  // namespace msa
