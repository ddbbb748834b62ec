// The BPE result cache: piece bytes -> token ids, one cache per thread and model, so lookups take no lock. Each
// cache is a flat open-addressing table of 32-byte slots (short keys and id lists inline, longer ones in two
// arenas); when it fills up it starts afresh, which keeps memory bounded (a few MiB per thread and model) while
// frequent pieces quickly come back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

class PieceCache {
public:
    static constexpr std::size_t kMaxKeyBytes = 256;

    // The calling thread's cache for the model with this serial number (see next_model_serial).
    static PieceCache& for_model(std::uint64_t model_serial);
    // A process-unique number for each model instance, so a cache never outlives the meaning of its ids.
    static std::uint64_t next_model_serial();

    // Appends the cached ids of `key` to `out` and returns true, or returns false.
    bool find(std::string_view key, std::vector<std::int32_t>& out) const;
    void insert(std::string_view key, const std::int32_t* ids, std::size_t count);

    static std::uint64_t hash(std::string_view key);

private:
    PieceCache();
    void clear();

    static constexpr std::size_t kSlots = 1 << 16;        // power of two
    static constexpr std::size_t kMaxEntries = kSlots / 2;  // load factor <= 0.5
    static constexpr std::size_t kInlineKeyBytes = 12;
    static constexpr std::size_t kInlineIds = 2;
    // 32 bytes: short keys and short id lists live in the slot itself, so most lookups touch one cache line.
    struct Slot {
        std::uint64_t hash = 0;  // 0: empty (hash() never returns 0)
        std::uint16_t key_length = 0;
        std::uint16_t ids_count = 0;
        char key[kInlineKeyBytes] = {};      // the key, or its offset in keys_ (uint32) when longer
        std::int32_t ids[kInlineIds] = {};  // the ids, or their offset in ids_ (ids[0]) when more
    };
    bool key_equals(const Slot& slot, std::string_view key) const;
    std::vector<Slot> slots_;
    std::string keys_;
    std::vector<std::int32_t> ids_;
    std::size_t entries_ = 0;
};

}  // namespace msa
