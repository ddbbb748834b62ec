#include "engine/block_hash.h"

#include <openssl/sha.h>

#include <cstring>
#include <string>

namespace msa {

BlockKey block_key(const BlockHash& hash) {
    BlockKey key;
    std::memcpy(&key.hi, hash.digest.data(), 8);
    std::memcpy(&key.lo, hash.digest.data() + 8, 8);
    return key;
}

const BlockHash& root_block_hash() {
    static const BlockHash root = [] {
        static constexpr std::string_view kScheme = "msa-engine prefix cache: sha256 chain v1";
        BlockHash h;
        SHA256(reinterpret_cast<const unsigned char*>(kScheme.data()), kScheme.size(), h.digest.data());
        return h;
    }();
    return root;
}

BlockHash hash_block(const BlockHash& parent, std::span<const std::int32_t> tokens, std::string_view extra) {
    std::string buf;
    buf.reserve(32 + 4 + tokens.size() * 4 + extra.size());
    buf.append(reinterpret_cast<const char*>(parent.digest.data()), parent.digest.size());
    auto put_u32 = [&buf](std::uint32_t v) {
        for (int i = 0; i < 4; ++i) buf.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));  // little-endian
    };
    put_u32(static_cast<std::uint32_t>(tokens.size()));
    for (std::int32_t t : tokens) put_u32(static_cast<std::uint32_t>(t));
    buf.append(extra);
    BlockHash h;
    SHA256(reinterpret_cast<const unsigned char*>(buf.data()), buf.size(), h.digest.data());
    return h;
}

void extend_block_hashes(std::span<const std::int32_t> tokens, std::int32_t page_size, std::string_view cache_salt,
                         std::vector<BlockHash>& hashes) {
    const std::size_t full = tokens.size() / page_size;
    for (std::size_t b = hashes.size(); b < full; ++b) {
        const BlockHash& parent = b == 0 ? root_block_hash() : hashes[b - 1];
        hashes.push_back(hash_block(parent, tokens.subspan(b * page_size, page_size), b == 0 ? cache_salt : ""));
    }
}

}  // namespace msa
