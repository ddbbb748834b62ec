// A self-contained paged KV layer for kernel tests (the kv module is not needed to test the kernels), plus an
// independent reader of stored rows built on the formats library.
#pragma once

#include "kernels/kv_layout.h"

#include <cstdint>
#include <vector>

namespace msa::test {

struct TestKvLayer {
    std::vector<std::uint8_t> storage;
    KvLayerView view;
    TestKvLayer(KvCacheDtype dtype, int kv_heads, int head_dim, int index_dim, int num_pages);
};

// Dequantises row `slot` of `page` with the formats library (exact values).
std::vector<float> stored_row(const PagedRows& rows, std::int32_t page, int slot);

}  // namespace msa::test
