#include "engine/block_manager.h"

#include "core/error.h"

namespace msa {

BlockManager::BlockManager(std::int32_t num_pages, std::int32_t page_size, bool enable_prefix_caching)
    : page_size_(page_size), prefix_caching_(enable_prefix_caching) {
    MSA_CHECK(num_pages > 0, "The KV cache needs at least one page, got {}.", num_pages);
    MSA_CHECK(page_size > 0, "The KV page size must be positive, got {}.", page_size);
    pages_.resize(num_pages);
    free_.reserve(num_pages);
    // Hand out low page ids first (pop from the back).
    for (PageId p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

std::vector<PageId> BlockManager::lookup(std::span<const BlockHash> hashes) const {
    std::vector<PageId> hit;
    if (!prefix_caching_) return hit;
    for (const BlockHash& h : hashes) {
        auto it = table_.find(block_key(h));
        if (it == table_.end()) break;
        hit.push_back(it->second);
    }
    return hit;
}

std::int32_t BlockManager::count_unreferenced(std::span<const PageId> pages) const {
    std::int32_t n = 0;
    for (PageId p : pages) n += pages_.at(p).ref_count == 0 ? 1 : 0;
    return n;
}

void BlockManager::acquire(std::span<const PageId> pages) {
    for (PageId p : pages) {
        Page& page = pages_.at(p);
        if (page.ref_count == 0) {
            MSA_CHECK(page.in_lru, "BlockManager::acquire: page {} is free and holds no cached block.", p);
            lru_remove(p);
        }
        ++page.ref_count;
    }
}

bool BlockManager::allocate(std::int32_t count, std::vector<PageId>& out) {
    if (count > num_free_pages()) return false;
    for (std::int32_t i = 0; i < count; ++i) {
        PageId p;
        if (!free_.empty()) {
            p = free_.back();
            free_.pop_back();
        } else {
            p = lru_head_;
            lru_remove(p);
            unregister(p);
            ++counters_.evictions;
        }
        pages_[p].ref_count = 1;
        out.push_back(p);
    }
    return true;
}

void BlockManager::release(std::span<const PageId> pages) {
    for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
        const PageId p = *it;
        Page& page = pages_.at(p);
        MSA_CHECK(page.ref_count > 0, "BlockManager::release: page {} is not referenced (double free).", p);
        if (--page.ref_count > 0) continue;
        if (page.registered) {
            lru_push_back(p);
        } else {
            free_.push_back(p);
        }
    }
}

bool BlockManager::register_block(PageId page_id, const BlockHash& hash) {
    if (!prefix_caching_) return false;
    Page& page = pages_.at(page_id);
    MSA_CHECK(page.ref_count > 0, "BlockManager::register_block: page {} is not referenced.", page_id);
    const BlockKey key = block_key(hash);
    if (page.registered) return page.key == key;
    auto [it, inserted] = table_.emplace(key, page_id);
    if (!inserted) return false;
    page.registered = true;
    page.key = key;
    return true;
}

void BlockManager::unregister(PageId p) {
    Page& page = pages_[p];
    if (!page.registered) return;
    table_.erase(page.key);
    page.registered = false;
}

void BlockManager::reset_prefix_cache() {
    while (lru_head_ != -1) {
        const PageId p = lru_head_;
        lru_remove(p);
        unregister(p);
        free_.push_back(p);
    }
    // Referenced pages keep serving their sequences but are no longer offered to new ones.
    for (PageId p = 0; p < num_pages(); ++p) unregister(p);
}

void BlockManager::lru_push_back(PageId p) {
    Page& page = pages_[p];
    page.in_lru = true;
    page.lru_prev = lru_tail_;
    page.lru_next = -1;
    if (lru_tail_ != -1) {
        pages_[lru_tail_].lru_next = p;
    } else {
        lru_head_ = p;
    }
    lru_tail_ = p;
    ++lru_size_;
}

void BlockManager::lru_remove(PageId p) {
    Page& page = pages_[p];
    if (page.lru_prev != -1) {
        pages_[page.lru_prev].lru_next = page.lru_next;
    } else {
        lru_head_ = page.lru_next;
    }
    if (page.lru_next != -1) {
        pages_[page.lru_next].lru_prev = page.lru_prev;
    } else {
        lru_tail_ = page.lru_prev;
    }
    page.in_lru = false;
    page.lru_prev = page.lru_next = -1;
    --lru_size_;
}

void BlockManager::check_invariants() const {
    const std::int32_t n = num_pages();
    std::vector<int> seen(n, 0);
    for (PageId p : free_) {
        MSA_CHECK(p >= 0 && p < n, "block manager: free list holds invalid page {}.", p);
        MSA_CHECK(seen[p]++ == 0, "block manager: page {} is on the free list twice.", p);
        MSA_CHECK(pages_[p].ref_count == 0 && !pages_[p].registered && !pages_[p].in_lru,
                  "block manager: free page {} is referenced, registered or on the LRU list.", p);
    }
    std::int32_t lru_count = 0;
    PageId prev = -1;
    for (PageId p = lru_head_; p != -1; p = pages_[p].lru_next) {
        MSA_CHECK(seen[p]++ == 0, "block manager: page {} is both free and cached, or on the LRU list twice.", p);
        MSA_CHECK(pages_[p].in_lru && pages_[p].ref_count == 0 && pages_[p].registered,
                  "block manager: LRU page {} is referenced or holds no cached block.", p);
        MSA_CHECK(pages_[p].lru_prev == prev, "block manager: LRU links broken at page {}.", p);
        prev = p;
        ++lru_count;
    }
    MSA_CHECK(prev == lru_tail_ && lru_count == lru_size_, "block manager: LRU list size or tail is wrong.");
    std::int32_t used = 0;
    for (PageId p = 0; p < n; ++p) {
        const Page& page = pages_[p];
        MSA_CHECK(page.ref_count >= 0, "block manager: page {} has a negative reference count.", p);
        if (page.ref_count > 0) {
            ++used;
            MSA_CHECK(seen[p] == 0 && !page.in_lru, "block manager: referenced page {} is also free or cached.", p);
        } else {
            MSA_CHECK(seen[p] == 1, "block manager: unreferenced page {} is neither free nor cached (leaked).", p);
        }
        if (page.registered) {
            auto it = table_.find(page.key);
            MSA_CHECK(it != table_.end() && it->second == p, "block manager: registered page {} is not in the table.",
                      p);
        }
    }
    MSA_CHECK(static_cast<std::int32_t>(free_.size()) + lru_size_ + used == n,
              "block manager: free {} + cached {} + used {} != total {}.", free_.size(), lru_size_, used, n);
    for (const auto& [key, p] : table_) {
        MSA_CHECK(pages_[p].registered && pages_[p].key == key, "block manager: table entry for page {} is stale.", p);
    }
}

}  // namespace msa
