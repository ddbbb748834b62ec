// Golden vectors from independent implementations (PyTorch's float8 dtypes and ml_dtypes), produced by
// tools/golden/gen_format_goldens.py and described in tests/formats/data/README.md. NaN outputs compare as NaN.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/convert.h"
#include "formats/cpu_paths.h"
#include "formats/format_tables.h"
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/reference_formats.h"
#include "formats/scalar_formats.h"

namespace msa::test {
namespace {

using Row = std::vector<std::string>;

std::filesystem::path golden_dir() {
    return std::filesystem::path(MSA_SOURCE_DIR) / "tests/formats/data";
}

// The data rows of a golden file (comment lines dropped), each split on whitespace. Skips the test when the data
// directory is absent; fails when only the file is.
std::vector<Row> read_golden(const std::string& name) {
    const std::filesystem::path path = golden_dir() / name;
    std::ifstream in(path);
    if (!in) {
        ADD_FAILURE() << "cannot open " << path;
        return {};
    }
    std::vector<Row> rows;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        Row row;
        for (std::string field; fields >> field;) row.push_back(field);
        rows.push_back(row);
    }
    return rows;
}

std::uint64_t hex(const std::string& field) {
    return std::stoull(field, nullptr, 16);
}

#define SKIP_WITHOUT_GOLDENS()                                                                              \
    if (!std::filesystem::is_directory(golden_dir())) GTEST_SKIP() << "no golden data in " << golden_dir(); \
    static_assert(true)

// ---- Decoding ----------------------------------------------------------------------------------------------------

void check_decode(const std::string& file, std::size_t codes, float (*decode)(std::uint8_t)) {
    const std::vector<Row> rows = read_golden(file);
    ASSERT_EQ(rows.size(), codes) << file;
    for (const Row& row : rows) {
        ASSERT_EQ(row.size(), 2u) << file;
        const auto code = static_cast<std::uint8_t>(hex(row[0]));
        const float golden = float_of(static_cast<std::uint32_t>(hex(row[1])));
        EXPECT_TRUE(same_float(decode(code), golden))
            << file << ": code " << row[0] << " decodes to " << decode(code) << ", golden " << golden;
    }
}

TEST(Golden, DecodeEveryCode) {
    SKIP_WITHOUT_GOLDENS();
    check_decode("decode_e4m3.txt", 256, [](std::uint8_t c) { return e4m3_to_float(c); });
    check_decode("decode_e5m2.txt", 256, [](std::uint8_t c) { return e5m2_to_float(c); });
    check_decode("decode_ue8m0.txt", 256, [](std::uint8_t c) { return ue8m0_to_float(c); });
    check_decode("decode_e2m1.txt", 16, [](std::uint8_t c) { return e2m1_to_float(c); });
    check_decode("decode_e4m3.txt", 256, [](std::uint8_t c) { return kE4M3ToFloat[c]; });
    check_decode("decode_e5m2.txt", 256, [](std::uint8_t c) { return kE5M2ToFloat[c]; });
}

using BulkDecode = void (*)(const std::uint8_t*, float*, std::size_t);

void check_bulk_decode(const std::string& file, BulkDecode bulk) {
    const std::vector<Row> rows = read_golden(file);
    std::vector<std::uint8_t> codes;
    for (const Row& row : rows) codes.push_back(static_cast<std::uint8_t>(hex(row[0])));
    on_every_path([&] {
        std::vector<float> out(codes.size());
        bulk(codes.data(), out.data(), codes.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            EXPECT_TRUE(same_float(out[i], float_of(static_cast<std::uint32_t>(hex(rows[i][1])))))
                << file << " code " << rows[i][0];
        }
    });
}

TEST(Golden, BulkDecodeEveryCode) {
    SKIP_WITHOUT_GOLDENS();
    check_bulk_decode("decode_e4m3.txt", e4m3_to_float);
    check_bulk_decode("decode_e5m2.txt", e5m2_to_float);
}

// ---- Encoding ----------------------------------------------------------------------------------------------------

struct EncodeCheck {
    const char* file;
    const FormatSpec* format;  // to recognise NaN codes
    std::uint32_t (*scalar)(float);
    void (*bulk)(const float*, std::uint32_t*, std::size_t);  // nullptr when there is no bulk version
};

template <typename Code, void (*Bulk)(const float*, Code*, std::size_t)>
void bulk_widened(const float* in, std::uint32_t* out, std::size_t n) {
    std::vector<Code> codes(n);
    Bulk(in, codes.data(), n);
    for (std::size_t i = 0; i < n; ++i) out[i] = codes[i];
}

void check_encode(const EncodeCheck& check) {
    const std::vector<Row> rows = read_golden(check.file);
    ASSERT_GT(rows.size(), 100u) << check.file;
    std::vector<float> inputs;
    std::vector<std::uint32_t> golden;
    for (const Row& row : rows) {
        ASSERT_EQ(row.size(), 2u) << check.file;
        inputs.push_back(float_of(static_cast<std::uint32_t>(hex(row[0]))));
        golden.push_back(static_cast<std::uint32_t>(hex(row[1])));
    }
    const auto expect_code = [&](std::size_t i, std::uint32_t code, const char* how) {
        if (ref_is_nan_code(*check.format, golden[i])) {
            EXPECT_TRUE(ref_is_nan_code(*check.format, code)) << check.file << " " << how << ": input " << rows[i][0];
        } else {
            EXPECT_EQ(code, golden[i]) << check.file << " " << how << ": input " << rows[i][0];
        }
    };
    for (std::size_t i = 0; i < inputs.size(); ++i) expect_code(i, check.scalar(inputs[i]), "scalar function");
    if (check.bulk == nullptr) return;
    on_every_path([&] {
        std::vector<std::uint32_t> codes(inputs.size());
        check.bulk(inputs.data(), codes.data(), inputs.size());
        for (std::size_t i = 0; i < inputs.size(); ++i) expect_code(i, codes[i], "bulk conversion");
    });
}

TEST(Golden, EncodeE4M3) {
    SKIP_WITHOUT_GOLDENS();
    check_encode({"encode_e4m3_sat.txt", &kRefE4M3, [](float x) -> std::uint32_t { return float_to_e4m3(x); },
                  bulk_widened<std::uint8_t, float_to_e4m3>});
    // PyTorch's own float8_e4m3fn cast is not saturating: it is our Overflow::ieee (NaN past 464).
    check_encode({"encode_e4m3_ieee.txt", &kRefE4M3,
                  [](float x) -> std::uint32_t { return float_to_e4m3(x, Overflow::ieee); }, nullptr});
}

TEST(Golden, EncodeE5M2) {
    SKIP_WITHOUT_GOLDENS();
    check_encode({"encode_e5m2_sat.txt", &kRefE5M2, [](float x) -> std::uint32_t { return float_to_e5m2(x); },
                  bulk_widened<std::uint8_t, float_to_e5m2>});
    check_encode({"encode_e5m2_ieee.txt", &kRefE5M2,
                  [](float x) -> std::uint32_t { return float_to_e5m2(x, Overflow::ieee); }, nullptr});
}

TEST(Golden, EncodeE2M1) {
    SKIP_WITHOUT_GOLDENS();
    check_encode({"encode_e2m1.txt", &kRefE2M1, [](float x) -> std::uint32_t { return float_to_e2m1(x); }, nullptr});
}

TEST(Golden, EncodeBf16AndFp16) {
    SKIP_WITHOUT_GOLDENS();
    check_encode({"encode_bf16.txt", &kRefBf16, [](float x) -> std::uint32_t { return float_to_bf16(x); },
                  bulk_widened<std::uint16_t, float_to_bf16>});
    check_encode({"encode_fp16_ieee.txt", &kRefFp16, [](float x) -> std::uint32_t { return float_to_fp16(x); },
                  bulk_widened<std::uint16_t, float_to_fp16>});
}

// ---- Block quantisers --------------------------------------------------------------------------------------------

// Parses rows of `values` input floats, a hex string of packed bytes (byte 0 first) and a scale code.
struct BlockGolden {
    std::vector<float> inputs;
    std::vector<std::uint8_t> bytes;
    std::vector<std::uint8_t> scales;
};

BlockGolden read_block_golden(const std::string& file, std::size_t values, std::size_t bytes_per_block) {
    BlockGolden g;
    for (const Row& row : read_golden(file)) {
        EXPECT_EQ(row.size(), values + 2) << file;
        if (row.size() != values + 2) break;
        for (std::size_t i = 0; i < values; ++i) g.inputs.push_back(float_of(static_cast<std::uint32_t>(hex(row[i]))));
        const std::string& packed = row[values];
        EXPECT_EQ(packed.size(), 2 * bytes_per_block) << file;
        for (std::size_t i = 0; i + 1 < packed.size(); i += 2) {
            g.bytes.push_back(static_cast<std::uint8_t>(hex(packed.substr(i, 2))));
        }
        g.scales.push_back(static_cast<std::uint8_t>(hex(row[values + 1])));
    }
    return g;
}

TEST(Golden, Nvfp4Quantize) {
    SKIP_WITHOUT_GOLDENS();
    const BlockGolden g = read_block_golden("nvfp4_quantize.txt", kNvfp4BlockSize, kNvfp4BlockSize / 2);
    ASSERT_GT(g.scales.size(), 100u);
    on_every_path([&] {
        std::vector<std::uint8_t> packed(g.bytes.size()), scales(g.scales.size());
        nvfp4_quantize(g.inputs.data(), g.inputs.size(), packed.data(), scales.data());
        for (std::size_t b = 0; b < g.scales.size(); ++b) {
            EXPECT_EQ(scales[b], g.scales[b]) << "block " << b;
            for (std::size_t j = b * 8; j < (b + 1) * 8; ++j) {
                EXPECT_EQ(packed[j], g.bytes[j]) << "block " << b << " byte " << j - b * 8;
            }
            if (::testing::Test::HasFailure()) return;
        }
    });
}

TEST(Golden, Mxfp8Quantize) {
    SKIP_WITHOUT_GOLDENS();
    const BlockGolden g = read_block_golden("mxfp8_quantize.txt", kMxfp8BlockSize, kMxfp8BlockSize);
    ASSERT_GT(g.scales.size(), 100u);
    on_every_path([&] {
        std::vector<std::uint8_t> values(g.bytes.size()), scales(g.scales.size());
        mxfp8_quantize(g.inputs.data(), g.inputs.size(), values.data(), scales.data());
        for (std::size_t b = 0; b < g.scales.size(); ++b) {
            EXPECT_EQ(scales[b], g.scales[b]) << "block " << b;
            for (std::size_t j = b * kMxfp8BlockSize; j < (b + 1) * kMxfp8BlockSize; ++j) {
                EXPECT_EQ(values[j], g.bytes[j])
                    << "block " << b << " element " << j - b * kMxfp8BlockSize << " x=" << g.inputs[j];
            }
            if (::testing::Test::HasFailure()) return;
        }
    });
}

}  // namespace
}  // namespace msa::test
