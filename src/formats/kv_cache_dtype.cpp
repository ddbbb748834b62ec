#include "formats/kv_cache_dtype.h"

#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace msa {

std::string_view kv_cache_dtype_name(KvCacheDtype dtype) {
    switch (dtype) {
        case KvCacheDtype::NVFP4:
            return "NVFP4";
        case KvCacheDtype::FP8:
            return "FP8";
        case KvCacheDtype::BF16:
            return "BF16";
    }
    return "?";
}

std::optional<KvCacheDtype> parse_kv_cache_dtype(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == "nvfp4") {
        return KvCacheDtype::NVFP4;
    }
    if (lower == "fp8" || lower == "fp8_e4m3") {
        return KvCacheDtype::FP8;
    }
    if (lower == "bf16" || lower == "bfloat16") {
        return KvCacheDtype::BF16;
    }
    return std::nullopt;
}

std::size_t kv_cache_vector_bytes(KvCacheDtype dtype, std::size_t channels) {
    switch (dtype) {
        case KvCacheDtype::NVFP4:
            // Two E2M1 codes per byte plus one E4M3 scale per 16 channels.
            MSA_CHECK(channels % 16 == 0, "an NVFP4 KV-cache vector needs a multiple of 16 channels, not {}", channels);
            return channels / 2 + channels / 16;
        case KvCacheDtype::FP8:
            return channels;
        case KvCacheDtype::BF16:
            return channels * 2;
    }
    return 0;
}

}  // namespace msa
