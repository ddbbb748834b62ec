// How K, V and index-K rows sit in paged KV storage, described for the kernels (the kv module owns the memory and
// hands out these views). One page holds kKvPageTokens consecutive tokens of a sequence = one MSA block.
//
// Within a page, the rows of one head are stored as formats.md section 5 describes:
//   NVFP4: [128 tokens][dim/2 bytes of E2M1 pairs], then [128 tokens][dim/16 E4M3 scales]
//   FP8:   [128 tokens][dim bytes of E4M3] (no scale)
//   BF16:  [128 tokens][dim bf16]
#pragma once

#include "formats/kv_cache_dtype.h"

#include <cstddef>
#include <cstdint>

namespace msa {

inline constexpr int kKvPageTokens = 128;

// Bytes of one row of `dim` values in a page: data part and scale part (together kv_cache_vector_bytes).
std::size_t kv_row_data_bytes(KvCacheDtype dtype, int dim);
std::size_t kv_row_scale_bytes(KvCacheDtype dtype, int dim);
// Bytes of one head's 128 rows in a page (data + scales).
inline std::size_t kv_head_page_bytes(KvCacheDtype dtype, int dim) {
    return kKvPageTokens * (kv_row_data_bytes(dtype, dim) + kv_row_scale_bytes(dtype, dim));
}

// One head's rows across all pages: the rows of physical page p start at base + p * page_stride.
struct PagedRows {
    KvCacheDtype dtype = KvCacheDtype::NVFP4;
    int dim = 0;
    std::uint8_t* base = nullptr;
    std::size_t page_stride = 0;

    std::uint8_t* page(std::int32_t p) const { return base + static_cast<std::size_t>(p) * page_stride; }
    std::uint8_t* row_data(std::int32_t p, int t) const { return page(p) + t * kv_row_data_bytes(dtype, dim); }
    // NVFP4 only: the dim/16 E4M3 scales of row t.
    std::uint8_t* row_scales(std::int32_t p, int t) const {
        return page(p) + kKvPageTokens * kv_row_data_bytes(dtype, dim) + t * kv_row_scale_bytes(dtype, dim);
    }
};

// The KV storage of one attention layer inside a page: K heads, then V heads, then (MSA layers) the index-K head,
// each kv_head_page_bytes long. `base` points at this layer's part of physical page 0.
struct KvLayerView {
    KvCacheDtype dtype = KvCacheDtype::NVFP4;
    int num_kv_heads = 0;
    int head_dim = 0;
    int index_dim = 0;  // 0: no index keys (dense attention layer)
    std::uint8_t* base = nullptr;
    std::size_t page_stride = 0;

    bool has_index() const { return index_dim > 0; }
    std::size_t head_bytes() const { return kv_head_page_bytes(dtype, head_dim); }
    PagedRows k(int head) const { return {dtype, head_dim, base + head * head_bytes(), page_stride}; }
    PagedRows v(int head) const {
        return {dtype, head_dim, base + (num_kv_heads + head) * head_bytes(), page_stride};
    }
    PagedRows index_k() const { return {dtype, index_dim, base + 2 * num_kv_heads * head_bytes(), page_stride}; }
    // Bytes this layer occupies in each page.
    std::size_t layer_page_bytes() const {
        return 2 * num_kv_heads * head_bytes() + (has_index() ? kv_head_page_bytes(dtype, index_dim) : 0);
    }
};

}  // namespace msa
