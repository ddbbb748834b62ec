// Block manager: page accounting, reference counts, prefix-cache lookup and LRU eviction order, chained block
// hashes with cache_salt isolation; a RapidCheck property runs random operation sequences against a simple model.
#include "engine/block_manager.h"
#include "core/error.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <numeric>

namespace msa {
namespace {

std::vector<std::int32_t> iota_tokens(int n, int start = 0) {
    std::vector<std::int32_t> t(n);
    std::iota(t.begin(), t.end(), start);
    return t;
}

std::vector<BlockHash> hashes_of(const std::vector<std::int32_t>& tokens, int page_size, std::string_view salt = "") {
    std::vector<BlockHash> h;
    extend_block_hashes(tokens, page_size, salt, h);
    return h;
}

TEST(BlockHash, ChainsOverFullBlocksOnly) {
    const auto tokens = iota_tokens(300);
    const auto h = hashes_of(tokens, 128);
    ASSERT_EQ(h.size(), 2u);  // the partial third block is not hashed
    EXPECT_EQ(h[0], hash_block(root_block_hash(), std::span(tokens).first(128), ""));
    EXPECT_EQ(h[1], hash_block(h[0], std::span(tokens).subspan(128, 128), ""));
    // Same prefix, same hashes; a change in block 0 changes every later hash (the chain).
    auto other = tokens;
    other[200] = 9999;
    EXPECT_EQ(hashes_of(other, 128)[0], h[0]);
    EXPECT_NE(hashes_of(other, 128)[1], h[1]);
    other = tokens;
    other[5] = 9999;
    EXPECT_NE(hashes_of(other, 128)[0], h[0]);
    EXPECT_NE(hashes_of(other, 128)[1], h[1]);
}

TEST(BlockHash, CacheSaltIsolatesTenants) {
    const auto tokens = iota_tokens(256);
    const auto plain = hashes_of(tokens, 128);
    const auto a = hashes_of(tokens, 128, "tenant-a");
    const auto b = hashes_of(tokens, 128, "tenant-b");
    EXPECT_NE(a[0], plain[0]);
    EXPECT_NE(a[0], b[0]);
    EXPECT_NE(a[1], b[1]);  // the salt is carried down the chain
    EXPECT_EQ(a, hashes_of(tokens, 128, "tenant-a"));
}

TEST(BlockHash, IsTheSha256OfTheDocumentedLayout) {
    // Known-answer test: SHA-256 over 32 zero bytes || u32 LE 2 || int32 LE {1, 2} || "s", computed with
    // Python's hashlib: hashlib.sha256(bytes(32) + (2).to_bytes(4,'little') + (1).to_bytes(4,'little') +
    // (2).to_bytes(4,'little') + b's').hexdigest().
    BlockHash zero;
    const BlockHash h = hash_block(zero, std::vector<std::int32_t>{1, 2}, "s");
    std::string hex;
    for (auto b : h.digest) hex += fmt::format("{:02x}", b);
    EXPECT_EQ(hex, "5a8980c6d749d17c76eee137ff2714292cb7e54d0b10490208528b2c1cc67849");
}

TEST(BlockManager, AllocateReleaseAndAccounting) {
    BlockManager bm(8, 16, true);
    std::vector<PageId> a, b;
    ASSERT_TRUE(bm.allocate(5, a));
    EXPECT_EQ(bm.num_used_pages(), 5);
    EXPECT_EQ(bm.num_free_pages(), 3);
    EXPECT_DOUBLE_EQ(bm.usage(), 5.0 / 8);
    EXPECT_FALSE(bm.allocate(4, b));  // all or nothing
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(bm.num_free_pages(), 3);
    bm.acquire(std::span(a).first(2));  // shared by a second owner
    EXPECT_EQ(bm.ref_count(a[0]), 2);
    bm.release(a);
    EXPECT_EQ(bm.num_used_pages(), 2);
    bm.release(std::span(a).first(2));
    EXPECT_EQ(bm.num_used_pages(), 0);
    EXPECT_THROW(bm.release(std::span(a).first(1)), Error);  // double free
    bm.check_invariants();
}

TEST(BlockManager, CachedBlocksAreReusedAndEvictedLeastRecentlyUsedTailFirst) {
    BlockManager bm(6, 4, true);
    const auto seq1 = hashes_of(iota_tokens(12), 4);      // 3 blocks
    const auto seq2 = hashes_of(iota_tokens(8, 100), 4);  // 2 blocks
    std::vector<PageId> p1, p2;
    ASSERT_TRUE(bm.allocate(3, p1));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(bm.register_block(p1[i], seq1[i]));
    ASSERT_TRUE(bm.allocate(2, p2));
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(bm.register_block(p2[i], seq2[i]));
    bm.release(p1);  // freed first: evicted first, and its tail before its head
    bm.release(p2);
    EXPECT_EQ(bm.num_cached_unreferenced_pages(), 5);
    EXPECT_EQ(bm.lookup(seq1), p1);
    EXPECT_EQ(bm.lookup(seq2), p2);

    std::vector<PageId> fresh;
    ASSERT_TRUE(bm.allocate(1, fresh));  // the one never-used page goes first
    EXPECT_EQ(bm.lookup(seq1).size(), 3u);
    ASSERT_TRUE(bm.allocate(1, fresh));  // evicts seq1's last block
    EXPECT_EQ(fresh.back(), p1[2]);
    EXPECT_EQ(bm.lookup(seq1).size(), 2u);
    // A hit takes the block out of the LRU list: it survives the next evictions.
    bm.acquire(std::span(p1).first(1));
    ASSERT_TRUE(bm.allocate(2, fresh));
    EXPECT_EQ(fresh[2], p1[1]);
    EXPECT_EQ(fresh[3], p2[1]);
    EXPECT_EQ(bm.lookup(seq1).size(), 1u);
    EXPECT_EQ(bm.lookup(seq2).size(), 1u);
    EXPECT_EQ(bm.counters().evictions, 3);
    bm.check_invariants();
}

TEST(BlockManager, DuplicateContentStaysPrivate) {
    BlockManager bm(4, 4, true);
    const auto h = hashes_of(iota_tokens(4), 4);
    std::vector<PageId> a, b;
    ASSERT_TRUE(bm.allocate(1, a));
    ASSERT_TRUE(bm.allocate(1, b));
    EXPECT_TRUE(bm.register_block(a[0], h[0]));
    EXPECT_FALSE(bm.register_block(b[0], h[0]));  // computed twice at once: the second copy is not published
    EXPECT_FALSE(bm.is_registered(b[0]));
    bm.release(b);
    EXPECT_EQ(bm.num_cached_unreferenced_pages(), 0);  // went straight back to the free list
    bm.release(a);
    EXPECT_EQ(bm.num_cached_unreferenced_pages(), 1);
    bm.check_invariants();
}

TEST(BlockManager, DisabledCacheAndReset) {
    BlockManager off(4, 4, false);
    const auto h = hashes_of(iota_tokens(4), 4);
    std::vector<PageId> p;
    ASSERT_TRUE(off.allocate(1, p));
    EXPECT_FALSE(off.register_block(p[0], h[0]));
    EXPECT_TRUE(off.lookup(h).empty());

    BlockManager on(4, 4, true);
    std::vector<PageId> q;
    ASSERT_TRUE(on.allocate(2, q));
    on.register_block(q[0], h[0]);
    on.release(std::span(q).first(1));
    on.reset_prefix_cache();
    EXPECT_TRUE(on.lookup(h).empty());
    EXPECT_EQ(on.num_cached_unreferenced_pages(), 0);
    EXPECT_EQ(on.num_free_pages(), 3);
    on.check_invariants();
}

// Random operations against a model that tracks each page's reference count and cached key.
RC_GTEST_PROP(BlockManagerProperty, RandomOperationsKeepTheBooks, ()) {
    const int num_pages = *rc::gen::inRange(1, 24);
    BlockManager bm(num_pages, 4, true);
    std::vector<std::vector<PageId>> owners;  // each owner holds a list of page references
    std::map<PageId, int> refs;
    const int steps = *rc::gen::inRange(1, 200);
    for (int step = 0; step < steps; ++step) {
        const int op = *rc::gen::inRange(0, 4);
        if (op == 0) {  // allocate
            const int n = *rc::gen::inRange(0, 6);
            std::vector<PageId> got;
            const bool ok = bm.allocate(n, got);
            RC_ASSERT(ok == (n <= num_pages - static_cast<int>(refs.size())));
            for (PageId p : got) RC_ASSERT(refs[p]++ == 0);
            if (ok) owners.push_back(got);
        } else if (op == 1 && !owners.empty()) {  // release one owner
            const auto i = *rc::gen::inRange<std::size_t>(0, owners.size());
            bm.release(owners[i]);
            for (PageId p : owners[i]) {
                if (--refs[p] == 0) refs.erase(p);
            }
            owners.erase(owners.begin() + static_cast<std::ptrdiff_t>(i));
        } else if (op == 2 && !owners.empty()) {  // publish a page under a key drawn from a small set
            const auto& o = owners[*rc::gen::inRange<std::size_t>(0, owners.size())];
            if (!o.empty()) {
                const int key = *rc::gen::inRange(0, 6);
                bm.register_block(o[0], hash_block(root_block_hash(), std::vector<std::int32_t>{key}, ""));
            }
        } else if (op == 3) {  // look up a key and share what is found
            const int key = *rc::gen::inRange(0, 6);
            const std::vector<BlockHash> h = {hash_block(root_block_hash(), std::vector<std::int32_t>{key}, "")};
            const auto hit = bm.lookup(h);
            if (!hit.empty()) {
                bm.acquire(hit);
                refs[hit[0]]++;
                owners.push_back(hit);
            }
        }
        bm.check_invariants();
        for (const auto& [p, n] : refs) RC_ASSERT(bm.ref_count(p) == n);
        RC_ASSERT(bm.num_used_pages() == static_cast<int>(refs.size()));
    }
    for (const auto& o : owners) bm.release(o);
    bm.check_invariants();
    RC_ASSERT(bm.num_free_pages() == num_pages);
}

}  // namespace
}  // namespace msa
