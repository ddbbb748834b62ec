#include "formats/dtype.h"

#include <array>

namespace msa {
namespace {

struct DTypeInfo {
    DType dtype;
    std::string_view name;
    std::size_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes{{
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

constexpr const DTypeInfo& info(DType dtype) {
    for (const DTypeInfo& entry : kDTypes) {
        if (entry.dtype == dtype) return entry;
    }
    return kDTypes[0];  // unreachable: every enumerator is in the table (checked below)
}

constexpr bool table_covers_every_dtype() {
    if (kDTypes.size() != static_cast<std::size_t>(DType::BOOL) + 1) return false;
    for (std::size_t i = 0; i < kDTypes.size(); ++i) {
        if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
    }
    return true;
}
static_assert(table_covers_every_dtype(), "kDTypes must list every DType in declaration order");

}  // namespace

std::string_view dtype_name(DType dtype) {
    return info(dtype).name;
}

std::optional<DType> parse_dtype(std::string_view name) {
    for (const DTypeInfo& entry : kDTypes) {
        if (entry.name == name) return entry.dtype;
    }
    return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
    return info(dtype).size;
}

}  // namespace msa
