// Element types of the KV cache (K, V and MSA index keys) and their storage cost (formats.md sections 2 and 5).
// NVFP4: per 16 channels 8 bytes of E2M1 pairs + 1 E4M3 scale (global scale 1); FP8: E4M3, one byte per channel,
// no per-block scale; BF16: two bytes per channel.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace msa {

enum class KvCacheDtype { NVFP4, FP8, BF16 };

inline constexpr std::array<KvCacheDtype, 3> kAllKvCacheDtypes = {KvCacheDtype::NVFP4, KvCacheDtype::FP8,
                                                                  KvCacheDtype::BF16};

// "NVFP4", "FP8", "BF16" (the spelling of quantization_config.kv_cache_quant_algo; BF16 is its absence).
std::string_view kv_cache_dtype_name(KvCacheDtype dtype);
// Accepts the names above case-insensitively, plus the aliases "fp8_e4m3" and "bfloat16"; std::nullopt otherwise.
std::optional<KvCacheDtype> parse_kv_cache_dtype(std::string_view name);

// Bytes that one cached vector of `channels` values takes (channels a multiple of 16 for NVFP4).
std::size_t kv_cache_vector_bytes(KvCacheDtype dtype, std::size_t channels);

}  // namespace msa
