#include "formats/dtype.h"

#include <array>
#include <utility>

namespace msa {

namespace {

struct DTypeInfo {
    DType dtype;
    std::string_view name;
    std::size_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {DType::F64, "F64", 8},
    {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},
    {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) {
    for (const auto& entry : kDTypes) {
        if (entry.dtype == dtype) {
            return entry;
        }
    }
    return kDTypes[0];  // unreachable for valid enum values
}

}  // namespace

std::string_view dtype_name(DType dtype) {
    return info(dtype).name;
}

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& entry : kDTypes) {
        if (entry.name == name) {
            return entry.dtype;
        }
    }
    return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
    return info(dtype).size;
}

}  // namespace msa
