// The KV page pool: which physical 128-token pages are free, which are referenced by sequences (reference
// counts; full blocks are shared copy-free), and which unreferenced pages still hold a cached prefix block that a
// later request can reuse (automatic prefix caching, LRU eviction).
//
// Every page is in exactly one of three states:
//   free     : refcount 0, no cached content (on the free stack)
//   cached   : refcount 0, holds a registered full block (on the LRU list; reused on a hit, evicted when needed)
//   used     : refcount > 0 (may also be registered in the cache, then other sequences can share it)
// The block manager knows nothing about sequences; the scheduler keeps page tables and calls acquire/release.
#pragma once

#include "engine/block_hash.h"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace msa {

using PageId = std::int32_t;

struct PrefixCacheCounters {
    std::int64_t queries = 0;  // tokens looked up (vLLM's prefix_cache_queries counts tokens)
    std::int64_t hits = 0;     // tokens found in the cache
    std::int64_t evictions = 0;
};

class BlockManager {
public:
    BlockManager(std::int32_t num_pages, std::int32_t page_size, bool enable_prefix_caching);

    std::int32_t num_pages() const { return static_cast<std::int32_t>(pages_.size()); }
    std::int32_t page_size() const { return page_size_; }
    bool prefix_caching() const { return prefix_caching_; }

    // Pages that allocate() can hand out now: free ones plus unreferenced cached ones (evictable).
    std::int32_t num_free_pages() const { return static_cast<std::int32_t>(free_.size()) + lru_size_; }
    // Pages referenced by at least one sequence.
    std::int32_t num_used_pages() const { return num_pages() - num_free_pages(); }
    std::int32_t num_cached_unreferenced_pages() const { return lru_size_; }
    std::int32_t num_registered_pages() const { return static_cast<std::int32_t>(table_.size()); }
    // Fraction of pages referenced by sequences, in [0, 1] (vllm:kv_cache_usage_perc).
    double usage() const { return num_pages() ? static_cast<double>(num_used_pages()) / num_pages() : 0.0; }

    // The pages holding the longest cached run of `hashes` from the first block on (stops at the first miss).
    // Takes no reference.
    std::vector<PageId> lookup(std::span<const BlockHash> hashes) const;
    // How many of `pages` are unreferenced now (sharing them takes them out of the free pool).
    std::int32_t count_unreferenced(std::span<const PageId> pages) const;

    // Takes one reference to each page (sharing a cached or another sequence's full block).
    void acquire(std::span<const PageId> pages);
    // Appends `count` fresh pages with refcount 1 to `out`, evicting least recently used cached blocks if needed.
    // Returns false and changes nothing when fewer than `count` pages are available.
    bool allocate(std::int32_t count, std::vector<PageId>& out);
    // Drops one reference to each page. Pages are processed last to first so that, among blocks freed together,
    // the tail of a chain is evicted before its head (a head is more likely to be shared).
    void release(std::span<const PageId> pages);
    // Publishes a full page's content hash. A key already cached by another page leaves this page private
    // (returns false); so does a disabled cache.
    bool register_block(PageId page, const BlockHash& hash);
    bool is_registered(PageId page) const { return pages_.at(page).registered; }
    // The key a registered page is cached under; nullptr when the page is not registered.
    const BlockKey* registered_key(PageId page) const {
        return pages_.at(page).registered ? &pages_[page].key : nullptr;
    }

    std::int32_t ref_count(PageId page) const { return pages_.at(page).ref_count; }

    // Forgets every cached block that no sequence references (vLLM's /reset_prefix_cache).
    void reset_prefix_cache();

    void record_lookup(std::int64_t queried_tokens, std::int64_t hit_tokens) {
        counters_.queries += queried_tokens;
        counters_.hits += hit_tokens;
    }
    const PrefixCacheCounters& counters() const { return counters_; }

    // Throws msa::Error when the internal structures disagree (tests call it after every step).
    void check_invariants() const;

private:
    struct Page {
        std::int32_t ref_count = 0;
        bool registered = false;
        BlockKey key;
        PageId lru_prev = -1, lru_next = -1;  // links of the LRU list (cached, unreferenced pages)
        bool in_lru = false;
    };

    void lru_push_back(PageId p);
    void lru_remove(PageId p);
    void unregister(PageId p);

    std::int32_t page_size_;
    bool prefix_caching_;
    std::vector<Page> pages_;
    std::vector<PageId> free_;              // free pages, used last-in first-out
    PageId lru_head_ = -1, lru_tail_ = -1;  // head: least recently used
    std::int32_t lru_size_ = 0;
    std::unordered_map<BlockKey, PageId, BlockKeyHasher> table_;
    PrefixCacheCounters counters_;
};

}  // namespace msa
