// KvCache: page geometry (formats.md section 5 and msa.md section 6 byte counts), per-layer placement, quantise on
// insert (equal to the row writer), page copies, and errors for out-of-range pages and slots.
#include "core/error.h"
#include "kernels/cpu/kv_rows.h"
#include "kv/kv_cache.h"
#include "support/test_data.h"
#include "support/test_kv.h"

#include <gtest/gtest.h>

#include <cstring>

namespace msa {
namespace {

KvCacheConfig m3_config(KvCacheDtype dtype, int layers, int pages) {
    KvCacheConfig c;
    c.dtype = dtype;
    c.num_kv_heads = 4;
    c.head_dim = 128;
    c.index_dim = 128;
    c.layer_has_index.assign(static_cast<std::size_t>(layers), true);
    c.num_pages = pages;
    return c;
}

TEST(KvCache, BytesPerTokenMatchTheSpec) {
    // msa.md section 6: per token per MSA layer, K+V 576 B and index-K 72 B in NVFP4; 1024 B + 128 B in FP8.
    EXPECT_EQ(m3_config(KvCacheDtype::NVFP4, 1, 1).bytes_per_token(), 576u + 72u);
    EXPECT_EQ(m3_config(KvCacheDtype::FP8, 1, 1).bytes_per_token(), 1024u + 128u);
    EXPECT_EQ(m3_config(KvCacheDtype::BF16, 1, 1).bytes_per_token(), 2048u + 256u);
    // model.md section 5: 60 layers of M3.1: K+V 34,560 B NVFP4 + index-K 4,320 B.
    EXPECT_EQ(m3_config(KvCacheDtype::NVFP4, 60, 1).bytes_per_token(), 34560u + 4320u);
    // A dense layer has no index keys.
    auto c = m3_config(KvCacheDtype::NVFP4, 3, 1);
    c.layer_has_index[0] = false;
    EXPECT_EQ(c.bytes_per_token(), 3u * 576u + 2u * 72u);
}

TEST(KvCache, WriteStoresQuantisedRowsInTheirLayerAndPage) {
    auto c = m3_config(KvCacheDtype::NVFP4, 3, 5);
    c.layer_has_index[1] = false;
    KvCache cache(c);
    const auto k = test::random_floats(4 * 128, 1), v = test::random_floats(4 * 128, 2), ik = test::random_floats(128, 3);
    cache.write(2, 3, 77, k.data(), v.data(), ik.data());
    cache.write(1, 4, 0, v.data(), k.data(), nullptr);
    const KvLayerView l2 = cache.layer(2);
    for (int h = 0; h < 4; ++h) {
        const auto back = test::stored_row(l2.k(h), 3, 77);
        // Equal to quantising the same values directly into a standalone layer.
        test::TestKvLayer ref(KvCacheDtype::NVFP4, 1, 128, 0, 1);
        cpu::write_kv_row(ref.view.k(0), 0, 0, k.data() + h * 128);
        EXPECT_EQ(back, test::stored_row(ref.view.k(0), 0, 0)) << "head " << h;
    }
    EXPECT_FALSE(cache.layer(1).has_index());
    EXPECT_TRUE(cache.layer(2).has_index());
    // Layers and pages land where the views say: layer 2's region of page 3 lies inside page 3's bytes.
    const auto page3 = cache.page(3);
    EXPECT_GE(l2.k(0).row_data(3, 0), page3.data());
    EXPECT_LE(l2.index_k().row_scales(3, 127) + 8, page3.data() + page3.size());
}

TEST(KvCache, CopyPageCopiesEveryLayer) {
    KvCache cache(m3_config(KvCacheDtype::FP8, 2, 3));
    const auto k = test::random_floats(4 * 128, 4), v = test::random_floats(4 * 128, 5), ik = test::random_floats(128, 6);
    for (int l = 0; l < 2; ++l) cache.write(l, 0, 5, k.data(), v.data(), ik.data());
    cache.copy_page(0, 2);
    EXPECT_EQ(0, std::memcmp(cache.page(0).data(), cache.page(2).data(), cache.page_bytes()));
    EXPECT_EQ(test::stored_row(cache.layer(1).index_k(), 2, 5), test::stored_row(cache.layer(1).index_k(), 0, 5));
}

TEST(KvCache, RejectsBadPagesSlotsAndShapes) {
    auto c = m3_config(KvCacheDtype::NVFP4, 2, 2);
    c.layer_has_index[0] = false;
    KvCache cache(c);
    std::vector<float> row(4 * 128, 0.5f);
    EXPECT_THROW(cache.write(0, 2, 0, row.data(), row.data(), nullptr), Error);
    EXPECT_THROW(cache.write(0, -1, 0, row.data(), row.data(), nullptr), Error);
    EXPECT_THROW(cache.write(0, 0, 128, row.data(), row.data(), nullptr), Error);
    EXPECT_THROW(cache.write(0, 0, 0, row.data(), row.data(), row.data()), Error);  // dense layer: no index keys
    EXPECT_THROW(cache.write(1, 0, 0, row.data(), row.data(), nullptr), Error);     // MSA layer needs them
    EXPECT_THROW(cache.layer(2), Error);
    auto bad = m3_config(KvCacheDtype::NVFP4, 1, 1);
    bad.head_dim = 72;
    EXPECT_THROW(KvCache{bad}, Error);
}

}  // namespace
}  // namespace msa
