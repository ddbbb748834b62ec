// Writing K/V/index-K rows into paged storage (quantising on insert, formats.md section 3) and reading a block of
// rows back as floats for the attention and indexer kernels.
#pragma once

#include "kernels/kv_layout.h"

#include <cstdint>

namespace msa::cpu {

// Stores x[0..dim) as row `slot` (0..127) of physical page `page`: NVFP4 with the KV-insert quantiser, E4M3 with a
// saturating round-to-nearest-even cast, BF16 with round-to-nearest-even.
void write_kv_row(const PagedRows& rows, std::int32_t page, int slot, const float* x);

// How stored values become floats for a kernel.
enum class KvRead {
    exact,  // NVFP4: e2m1 * scale; FP8: the E4M3 value; BF16: the BF16 value
    e4m3,   // the Q8KV4 contract: the exact value rounded once to E4M3 (satfinite RNE); FP8 is unchanged
};

// Rows [0, count) of `page` -> out [count][dim].
void read_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out);

}  // namespace msa::cpu
