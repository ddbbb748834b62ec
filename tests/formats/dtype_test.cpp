#include <gtest/gtest.h>

#include "formats/dtype.h"

namespace msa {
namespace {

TEST(DType, NamesSizesAndParsing) {
    struct Expected {
        DType dtype;
        const char* name;
        std::size_t size;
    };
    const Expected all[] = {{DType::F64, "F64", 8},   {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
                            {DType::BF16, "BF16", 2}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
                            {DType::I64, "I64", 8},   {DType::I32, "I32", 4},         {DType::I16, "I16", 2},
                            {DType::I8, "I8", 1},     {DType::U8, "U8", 1},           {DType::BOOL, "BOOL", 1}};
    for (const Expected& e : all) {
        EXPECT_EQ(dtype_name(e.dtype), e.name);
        EXPECT_EQ(dtype_size(e.dtype), e.size) << e.name;
        EXPECT_EQ(parse_dtype(e.name), e.dtype) << e.name;
    }
}

TEST(DType, UnknownNamesAreRejected) {
    for (const char* name : {"", "f32", "F8_E4M3FN", "FP8", "U16", "BF16 ", "F4"}) {
        EXPECT_FALSE(parse_dtype(name).has_value()) << '"' << name << '"';
    }
}

}  // namespace
}  // namespace msa
