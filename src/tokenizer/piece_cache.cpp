#include "tokenizer/piece_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

namespace msa {
namespace {

// Caches of the models this thread used most recently; older ones are dropped (their models may be gone).
constexpr std::size_t kCachesPerThread = 4;

std::uint64_t mix(std::uint64_t h) {
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    return h;
}

}  // namespace

PieceCache::PieceCache() : slots_(kSlots) {}

std::uint64_t PieceCache::next_model_serial() {
    static std::atomic<std::uint64_t> counter{1};
    return counter.fetch_add(1);
}

PieceCache& PieceCache::for_model(std::uint64_t model_serial) {
    struct Entry {
        std::uint64_t serial;
        std::unique_ptr<PieceCache> cache;
    };
    thread_local std::vector<Entry> caches;
    for (std::size_t i = 0; i < caches.size(); ++i) {
        if (caches[i].serial == model_serial) {
            if (i != 0) std::swap(caches[i], caches[0]);  // most recent first
            return *caches[0].cache;
        }
    }
    if (caches.size() >= kCachesPerThread) caches.pop_back();
    caches.insert(caches.begin(), Entry{model_serial, std::unique_ptr<PieceCache>(new PieceCache())});
    return *caches[0].cache;
}

std::uint64_t PieceCache::hash(std::string_view key) {
    std::uint64_t h = 0x243F6A8885A308D3ULL ^ key.size();
    std::size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
        std::uint64_t word;
        std::memcpy(&word, key.data() + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 31;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, key.data() + i, key.size() - i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
    return mix(h) | 1;
}

bool PieceCache::key_equals(const Slot& slot, std::string_view key) const {
    if (slot.key_length != key.size()) return false;
    if (key.size() <= kInlineKeyBytes) return std::memcmp(slot.key, key.data(), key.size()) == 0;
    std::uint32_t offset;
    std::memcpy(&offset, slot.key, sizeof(offset));
    return std::memcmp(keys_.data() + offset, key.data(), key.size()) == 0;
}

bool PieceCache::find(std::string_view key, std::vector<std::int32_t>& out) const {
    const std::uint64_t h = hash(key);
    std::size_t index = h & (kSlots - 1);
    while (slots_[index].hash != 0) {
        const Slot& s = slots_[index];
        if (s.hash == h && key_equals(s, key)) {
            if (s.ids_count <= kInlineIds) {
                out.insert(out.end(), s.ids, s.ids + s.ids_count);
            } else {
                const auto* first = ids_.data() + s.ids[0];
                out.insert(out.end(), first, first + s.ids_count);
            }
            return true;
        }
        index = (index + 1) & (kSlots - 1);
    }
    return false;
}

void PieceCache::insert(std::string_view key, const std::int32_t* ids, std::size_t count) {
    if (key.size() > kMaxKeyBytes || count > 0xFFFF) return;
    if (entries_ >= kMaxEntries) clear();
    const std::uint64_t h = hash(key);
    std::size_t index = h & (kSlots - 1);
    while (slots_[index].hash != 0) {
        if (slots_[index].hash == h && key_equals(slots_[index], key)) return;  // already there
        index = (index + 1) & (kSlots - 1);
    }
    Slot& s = slots_[index];
    s.hash = h;
    s.key_length = static_cast<std::uint16_t>(key.size());
    s.ids_count = static_cast<std::uint16_t>(count);
    if (key.size() <= kInlineKeyBytes) {
        std::memcpy(s.key, key.data(), key.size());
    } else {
        const auto offset = static_cast<std::uint32_t>(keys_.size());
        std::memcpy(s.key, &offset, sizeof(offset));
        keys_.append(key);
    }
    if (count <= kInlineIds) {
        std::copy(ids, ids + count, s.ids);
    } else {
        s.ids[0] = static_cast<std::int32_t>(ids_.size());
        ids_.insert(ids_.end(), ids, ids + count);
    }
    ++entries_;
}

void PieceCache::clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    entries_ = 0;
}

}  // namespace msa
