#include "kernels/kv_layout.h"

namespace msa {

std::string_view kv_dtype_name(KvDtype dtype) {
    switch (dtype) {
        case KvDtype::nvfp4: return "nvfp4";
        case KvDtype::fp8_e4m3: return "fp8";
        case KvDtype::bf16: return "bf16";
    }
    return "?";
}

std::optional<KvDtype> parse_kv_dtype(std::string_view name) {
    if (name == "nvfp4" || name == "NVFP4") return KvDtype::nvfp4;
    if (name == "fp8" || name == "FP8" || name == "fp8_e4m3") return KvDtype::fp8_e4m3;
    if (name == "bf16" || name == "BF16" || name == "auto") return KvDtype::bf16;
    return std::nullopt;
}

std::size_t kv_row_data_bytes(KvDtype dtype, int dim) {
    switch (dtype) {
        case KvDtype::nvfp4: return static_cast<std::size_t>(dim) / 2;
        case KvDtype::fp8_e4m3: return static_cast<std::size_t>(dim);
        case KvDtype::bf16: return static_cast<std::size_t>(dim) * 2;
    }
    return 0;
}

std::size_t kv_row_scale_bytes(KvDtype dtype, int dim) {
    return dtype == KvDtype::nvfp4 ? static_cast<std::size_t>(dim) / 16 : 0;
}

}  // namespace msa
