#include "support/test_kv.h"

#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"

#include <cstring>

namespace msa::test {

TestKvLayer::TestKvLayer(KvCacheDtype dtype, int kv_heads, int head_dim, int index_dim, int num_pages) {
    view.dtype = dtype;
    view.num_kv_heads = kv_heads;
    view.head_dim = head_dim;
    view.index_dim = index_dim;
    // Pad the stride so that page boundaries are not accidentally contiguous with the layer's end.
    view.page_stride = view.layer_page_bytes() + 64;
    storage.assign(view.page_stride * static_cast<std::size_t>(num_pages), 0xA5);
    view.base = storage.data();
}

std::vector<float> stored_row(const PagedRows& rows, std::int32_t page, int slot) {
    std::vector<float> out(static_cast<std::size_t>(rows.dim));
    const std::uint8_t* d = rows.row_data(page, slot);
    switch (rows.dtype) {
        case KvCacheDtype::NVFP4:
            nvfp4_dequantize(d, rows.row_scales(page, slot), out.size(), 1.0f, out.data());
            break;
        case KvCacheDtype::FP8:
            for (int i = 0; i < rows.dim; ++i) out[i] = e4m3_to_float(d[i]);
            break;
        case KvCacheDtype::BF16:
            for (int i = 0; i < rows.dim; ++i) {
                std::uint16_t b;
                std::memcpy(&b, d + 2 * i, 2);
                out[i] = bf16_to_float(b);
            }
            break;
    }
    return out;
}

}  // namespace msa::test
