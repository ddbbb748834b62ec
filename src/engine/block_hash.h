// Chained content hashes of full KV blocks for automatic prefix caching. The hash of block i covers every token
// of blocks 0..i (through the parent hash) and the request's extra keys (cache_salt), so equal hashes mean equal
// prefixes: SHA-256(parent digest || number of tokens || token ids as int32 little-endian || extra keys), with
// the salt only in block 0 (the chain carries it on). The table key is the first 128 bits of the digest.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace msa {

struct BlockHash {
    std::array<std::uint8_t, 32> digest{};
    bool operator==(const BlockHash&) const = default;
};

// The 128-bit key a block is cached under.
struct BlockKey {
    std::uint64_t hi = 0, lo = 0;
    bool operator==(const BlockKey&) const = default;
};

struct BlockKeyHasher {
    std::size_t operator()(const BlockKey& k) const {
        return static_cast<std::size_t>(k.hi ^ (k.lo * 0x9E3779B97F4A7C15ull));
    }
};

BlockKey block_key(const BlockHash& hash);

// The parent of block 0: a fixed digest naming the scheme, so that a change of scheme changes every key.
const BlockHash& root_block_hash();

// Hash of one full block: `tokens` are its page_size token ids, `extra` the extra keys (empty for blocks > 0).
BlockHash hash_block(const BlockHash& parent, std::span<const std::int32_t> tokens, std::string_view extra);

// Appends to `hashes` the hashes of the full blocks of `tokens` that are not yet hashed (hashes.size() blocks are).
void extend_block_hashes(std::span<const std::int32_t> tokens, std::int32_t page_size, std::string_view cache_salt,
                         std::vector<BlockHash>& hashes);

}  // namespace msa
