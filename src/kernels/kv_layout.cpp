#include "kernels/kv_layout.h"

namespace msa {

std::size_t kv_row_data_bytes(KvCacheDtype dtype, int dim) {
    switch (dtype) {
        case KvCacheDtype::NVFP4: return static_cast<std::size_t>(dim) / 2;
        case KvCacheDtype::FP8: return static_cast<std::size_t>(dim);
        case KvCacheDtype::BF16: return static_cast<std::size_t>(dim) * 2;
    }
    return 0;
}

std::size_t kv_row_scale_bytes(KvCacheDtype dtype, int dim) {
    return dtype == KvCacheDtype::NVFP4 ? static_cast<std::size_t>(dim) / 16 : 0;
}

}  // namespace msa
