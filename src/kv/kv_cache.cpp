#include "kv/kv_cache.h"

#include "core/error.h"
#include "kernels/cpu/kv_rows.h"

#include <cstdlib>
#include <cstring>

namespace msa {
namespace {

KvLayerView layer_shape(const KvCacheConfig& c, int layer) {
    KvLayerView v;
    v.dtype = c.dtype;
    v.num_kv_heads = c.num_kv_heads;
    v.head_dim = c.head_dim;
    v.index_dim = c.layer_has_index[static_cast<std::size_t>(layer)] ? c.index_dim : 0;
    return v;
}

void validate(const KvCacheConfig& c) {
    MSA_CHECK(c.num_kv_heads > 0 && c.head_dim > 0, "KV cache needs positive num_kv_heads and head_dim, got {} and {}",
              c.num_kv_heads, c.head_dim);
    MSA_CHECK(!c.layer_has_index.empty(), "KV cache needs at least one layer");
    MSA_CHECK(c.num_pages >= 0, "KV cache page count must not be negative, got {}", c.num_pages);
    if (c.dtype == KvCacheDtype::NVFP4) {
        MSA_CHECK(c.head_dim % 16 == 0, "an NVFP4 KV cache needs head_dim divisible by 16, got {}", c.head_dim);
    }
    for (bool idx : c.layer_has_index) {
        if (idx) {
            MSA_CHECK(c.index_dim > 0 && (c.dtype != KvCacheDtype::NVFP4 || c.index_dim % 16 == 0),
                      "MSA layers need an index_dim divisible by 16, got {}", c.index_dim);
        }
    }
}

}  // namespace

std::size_t KvCacheConfig::page_bytes() const {
    std::size_t total = 0;
    for (int l = 0; l < num_layers(); ++l) total += layer_shape(*this, l).layer_page_bytes();
    return total;
}

void KvCache::FreeDeleter::operator()(std::uint8_t* p) const { std::free(p); }

KvCache::KvCache(const KvCacheConfig& config) : KvCache(config, nullptr) {}

KvCache::KvCache(const KvCacheConfig& config, std::uint8_t* storage) : config_(config) {
    validate(config_);
    std::size_t offset = 0;
    for (int l = 0; l < config_.num_layers(); ++l) {
        layer_offset_.push_back(offset);
        offset += layer_shape(config_, l).layer_page_bytes();
    }
    page_bytes_ = offset;
    const std::size_t total = page_bytes_ * static_cast<std::size_t>(config_.num_pages);
    if (storage != nullptr) {
        storage_ = storage;
    } else if (total > 0) {
        const std::size_t aligned = (total + 63) / 64 * 64;
        owned_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(64, aligned)));
        MSA_CHECK(owned_ != nullptr, "cannot allocate {} bytes for a KV cache of {} pages", total, config_.num_pages);
        storage_ = owned_.get();
    }
}

KvLayerView KvCache::layer(int layer) const {
    MSA_CHECK(layer >= 0 && layer < config_.num_layers(), "KV cache has no layer {}", layer);
    KvLayerView v = layer_shape(config_, layer);
    v.base = storage_ + layer_offset_[static_cast<std::size_t>(layer)];
    v.page_stride = page_bytes_;
    return v;
}

void KvCache::check_page(std::int32_t page) const {
    MSA_CHECK(page >= 0 && page < config_.num_pages, "KV page {} is outside the cache's {} pages", page,
              config_.num_pages);
}

void KvCache::write(int layer, std::int32_t page, int slot, const float* k, const float* v, const float* index_k) {
    check_page(page);
    MSA_CHECK(slot >= 0 && slot < kKvPageTokens, "KV slot {} is outside a {}-token page", slot, kKvPageTokens);
    const KvLayerView view = this->layer(layer);
    MSA_CHECK(view.has_index() == (index_k != nullptr), "layer {} {} index keys", layer,
              view.has_index() ? "needs" : "has no");
    for (int h = 0; h < view.num_kv_heads; ++h) {
        cpu::write_kv_row(view.k(h), page, slot, k + static_cast<std::size_t>(h) * view.head_dim);
        cpu::write_kv_row(view.v(h), page, slot, v + static_cast<std::size_t>(h) * view.head_dim);
    }
    if (index_k != nullptr) cpu::write_kv_row(view.index_k(), page, slot, index_k);
}

std::span<std::uint8_t> KvCache::page(std::int32_t page) {
    check_page(page);
    return {storage_ + static_cast<std::size_t>(page) * page_bytes_, page_bytes_};
}

void KvCache::copy_page(std::int32_t from, std::int32_t to) {
    check_page(from);
    check_page(to);
    if (from != to) std::memcpy(page(to).data(), page(from).data(), page_bytes_);
}

}  // namespace msa
