// Paged KV storage for the whole model (msa.md section 6, formats.md sections 3 and 5).
//
// The cache is an array of pages; a page holds 128 consecutive tokens of one sequence for every layer: per layer,
// K of each KV head, V of each KV head, then (MSA layers) the shared index key, each stored as formats.md section 5
// describes. All layers of a page are contiguous ("block-outer"), so a page moves in one copy (prefix sharing,
// swapping, disaggregated transfer). Page ids come from the engine's block manager; this class only stores pages
// by id and quantises rows on insert (NVFP4 with the KV-insert rule, FP8 E4M3 saturating, or BF16).
#pragma once

#include "kernels/kv_layout.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace msa {

struct KvCacheConfig {
    KvCacheDtype dtype = KvCacheDtype::NVFP4;
    int num_kv_heads = 0;
    int head_dim = 0;
    int index_dim = 0;                  // index-key width of MSA layers
    std::vector<bool> layer_has_index;  // one entry per layer: true for MSA layers
    std::int32_t num_pages = 0;

    int num_layers() const { return static_cast<int>(layer_has_index.size()); }
    // Bytes of one page (all layers) and of one token (page bytes / 128).
    std::size_t page_bytes() const;
    std::size_t bytes_per_token() const { return page_bytes() / kKvPageTokens; }
};

class KvCache {
public:
    // Allocates num_pages pages (memory is committed lazily by the OS as pages are first written).
    explicit KvCache(const KvCacheConfig& config);
    // Uses caller-provided storage of at least config.page_bytes() * num_pages bytes (e.g. a backend's memory).
    KvCache(const KvCacheConfig& config, std::uint8_t* storage);

    const KvCacheConfig& config() const { return config_; }
    std::int32_t num_pages() const { return config_.num_pages; }
    std::size_t page_bytes() const { return page_bytes_; }

    // Where layer `layer` lives inside every page, for the kernels.
    KvLayerView layer(int layer) const;

    // Quantises and stores one token's rows of one layer: k and v are [num_kv_heads][head_dim]; index_k is
    // [index_dim] for MSA layers and must be null for dense layers.
    void write(int layer, std::int32_t page, int slot, const float* k, const float* v, const float* index_k);

    // The whole page (every layer) as bytes, and a page-to-page copy (copy-on-write of shared prefix pages).
    std::span<std::uint8_t> page(std::int32_t page);
    void copy_page(std::int32_t from, std::int32_t to);

private:
    struct FreeDeleter {
        void operator()(std::uint8_t* p) const;
    };
    void check_page(std::int32_t page) const;

    KvCacheConfig config_;
    std::size_t page_bytes_ = 0;
    std::vector<std::size_t> layer_offset_;
    std::unique_ptr<std::uint8_t, FreeDeleter> owned_;
    std::uint8_t* storage_ = nullptr;
};

}  // namespace msa
