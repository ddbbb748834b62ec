// Element types of tensors as stored in checkpoints and caches (safetensors dtype names).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace msa {

enum class DType {
    F64,
    F32,
    F16,
    BF16,
    F8_E4M3,
    F8_E5M2,
    I64,
    I32,
    I16,
    I8,
    U8,
    BOOL,
};

// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string; std::nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);
// Bytes per element.
std::size_t dtype_size(DType dtype);

}  // namespace msa
