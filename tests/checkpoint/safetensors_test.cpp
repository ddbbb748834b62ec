// The safetensors reader and writer: round trips, the exact byte layout of the format (files built by hand here,
// independently of the writer), every kind of corruption giving one clear error that names the file and tensor,
// sharded checkpoints and their index, and a property that no corruption of a valid file crashes the parser.
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

namespace msa {
namespace {

using test::error_of;
using test::TempDir;
using ::testing::HasSubstr;

// A safetensors file built by hand: 8-byte little-endian length, header text, data.
std::string raw_file(std::string_view header, std::string_view data, std::int64_t length_override = -1) {
    const std::uint64_t length = length_override >= 0 ? static_cast<std::uint64_t>(length_override) : header.size();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) {
        out[static_cast<std::size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xFF);
    }
    out += header;
    out += data;
    return out;
}

// Writes `contents` to DIR/name and returns the error message of opening it.
std::string open_error(const TempDir& dir, std::string_view name, const std::string& contents) {
    const std::string path = dir.file(name);
    test::write_file(path, contents);
    const std::string message = error_of([&] { SafetensorsFile file(path); });
    EXPECT_THAT(message, HasSubstr(path)) << "the error must name the file";
    return message;
}

std::vector<std::uint8_t> iota_bytes(std::size_t n, std::uint8_t start = 0) {
    std::vector<std::uint8_t> bytes(n);
    std::iota(bytes.begin(), bytes.end(), start);
    return bytes;
}

// ---- reading files laid out by hand -------------------------------------------------------------------------

TEST(SafetensorsReader, ReadsHandBuiltFileWithEveryDtype) {
    TempDir dir;
    struct Case {
        const char* dtype;
        DType expected;
        std::size_t element;
    };
    const Case cases[] = {{"F64", DType::F64, 8},   {"F32", DType::F32, 4},         {"F16", DType::F16, 2},
                          {"BF16", DType::BF16, 2}, {"F8_E4M3", DType::F8_E4M3, 1}, {"F8_E5M2", DType::F8_E5M2, 1},
                          {"I64", DType::I64, 8},   {"I32", DType::I32, 4},         {"I16", DType::I16, 2},
                          {"I8", DType::I8, 1},     {"U8", DType::U8, 1},           {"BOOL", DType::BOOL, 1}};
    for (const auto& c : cases) {
        // Two tensors: a [2, 3] one and a scalar, in the data region in that order.
        const std::size_t first = 6 * c.element;
        const std::string header = std::string("{\"__metadata__\":{\"format\":\"pt\"},\"t\":{\"dtype\":\"") + c.dtype +
                                   "\",\"shape\":[2,3],\"data_offsets\":[0," + std::to_string(first) +
                                   "]},\"s\":{\"dtype\":\"" + c.dtype + "\",\"shape\":[],\"data_offsets\":[" +
                                   std::to_string(first) + "," + std::to_string(first + c.element) + "]}}";
        std::string data(first + c.element, '\0');
        for (std::size_t i = 0; i < data.size(); ++i) {
            data[i] = static_cast<char>(i * 7 + 1);
        }
        const std::string path = dir.file(std::string(c.dtype) + ".safetensors");
        test::write_file(path, raw_file(header, data));
        SafetensorsFile file(path);
        ASSERT_EQ(file.tensors().size(), 2u) << c.dtype;
        const TensorView& t = file.get("t");
        EXPECT_EQ(t.dtype, c.expected);
        EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
        EXPECT_EQ(t.numel(), 6);
        EXPECT_EQ(t.file, path);
        ASSERT_EQ(t.bytes.size(), first);
        EXPECT_EQ(std::memcmp(t.bytes.data(), data.data(), first), 0);
        const TensorView& s = file.get("s");
        EXPECT_TRUE(s.shape.empty());
        EXPECT_EQ(s.numel(), 1);
        EXPECT_EQ(std::memcmp(s.bytes.data(), data.data() + first, c.element), 0);
        EXPECT_EQ(file.metadata().at("format"), "pt");
        EXPECT_EQ(file.find("absent"), nullptr);
    }
}

TEST(SafetensorsReader, ViewsAreZeroCopyAndTyped) {
    TempDir dir;
    // Header padded with spaces to 8 bytes so that the F32 data is aligned.
    std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    float values[2] = {1.5f, -2.25f};
    const std::string path = dir.file("f.safetensors");
    test::write_file(path, raw_file(header, std::string_view(reinterpret_cast<const char*>(values), 8)));
    SafetensorsFile file(path);
    const auto floats = file.get("w").as<float>();
    ASSERT_EQ(floats.size(), 2u);
    EXPECT_EQ(floats[0], 1.5f);
    EXPECT_EQ(floats[1], -2.25f);
    EXPECT_THAT(error_of([&] { (void)file.get("w").as<std::uint16_t>(); }), HasSubstr("\"w\""));
    EXPECT_THAT(error_of([&] { (void)file.get("nope"); }), HasSubstr("\"nope\""));
}

TEST(SafetensorsReader, ZeroSizedTensorsAndEmptyFile) {
    TempDir dir;
    const std::string path = dir.file("z.safetensors");
    test::write_file(path, raw_file(R"({"e":{"dtype":"BF16","shape":[0,4],"data_offsets":[0,0]},)"
                                    R"("x":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})",
                                    "abc"));
    SafetensorsFile file(path);
    EXPECT_EQ(file.get("e").bytes.size(), 0u);
    EXPECT_EQ(file.get("x").bytes.size(), 3u);

    const std::string empty = dir.file("empty.safetensors");
    test::write_file(empty, raw_file("{}", ""));
    EXPECT_TRUE(SafetensorsFile(empty).tensors().empty());
}

// ---- corruption: each gives one msa::Error naming the file (and the tensor where there is one) --------------

TEST(SafetensorsCorruption, TruncatedAndOversizedHeaders) {
    TempDir dir;
    EXPECT_THAT(open_error(dir, "short", "abc"), HasSubstr("too short"));
    EXPECT_THAT(open_error(dir, "empty", ""), HasSubstr("too short"));
    EXPECT_THAT(open_error(dir, "long", raw_file("{}", "", 1000)), HasSubstr("larger than the file"));
    EXPECT_THAT(open_error(dir, "huge", raw_file("{}", "", std::int64_t{1} << 62)), HasSubstr("larger than the file"));
    // A valid file cut short: the header length now runs past the end.
    const std::string valid = raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "wxyz");
    EXPECT_THAT(open_error(dir, "cut_header", valid.substr(0, 20)), HasSubstr("larger than the file"));
    // Cut inside the data region: the tensor's end is past the data.
    EXPECT_THAT(open_error(dir, "cut_data", valid.substr(0, valid.size() - 1)),
                ::testing::AllOf(HasSubstr("\"a\""), HasSubstr("past the end")));
}

TEST(SafetensorsCorruption, HeaderNotJsonOrNotObject) {
    TempDir dir;
    EXPECT_THAT(open_error(dir, "notjson", raw_file("{\"a\": tru", "")), HasSubstr("not valid JSON"));
    EXPECT_THAT(open_error(dir, "binary", raw_file(std::string("{\x01\n\xff\"", 5), "")), HasSubstr("not valid JSON"));
    EXPECT_THAT(open_error(dir, "array", raw_file("[1, 2]", "")), HasSubstr("must be a JSON object"));
    EXPECT_THAT(open_error(dir, "string", raw_file("\"x\"", "")), HasSubstr("must be a JSON object"));
    EXPECT_THAT(open_error(dir, "tiny", raw_file("{", "")), HasSubstr("too small"));
    EXPECT_THAT(
        open_error(dir, "deep", raw_file("{\"a\":" + std::string(1000, '[') + std::string(1000, ']') + "}", "")),
        HasSubstr("deeper than"));
}

TEST(SafetensorsCorruption, MissingAndMistypedFields) {
    TempDir dir;
    struct Case {
        const char* header;
        const char* expected;
    };
    const Case cases[] = {
        {R"({"t":5})", "header entry must be an object"},
        {R"({"t":{"shape":[1],"data_offsets":[0,1]}})", "\"dtype\" is missing"},
        {R"({"t":{"dtype":1,"shape":[1],"data_offsets":[0,1]}})", "\"dtype\" must be a string"},
        {R"({"t":{"dtype":"U8","data_offsets":[0,1]}})", "\"shape\" is missing"},
        {R"({"t":{"dtype":"U8","shape":"1","data_offsets":[0,1]}})", "\"shape\" must be an array"},
        {R"({"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "a negative integer"},
        {R"({"t":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "a fractional number"},
        {R"({"t":{"dtype":"U8","shape":[1]}})", "\"data_offsets\" is missing"},
        {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "an array of 3 elements"},
        {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":{"a":1}}})", "must be an array [begin, end]"},
        {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "non-negative integers"},
        {R"({"t":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}})", "unknown dtype \"F4\""},
        {R"({"t":{"dtype":"bf16","shape":[1],"data_offsets":[0,1]}})", "unknown dtype \"bf16\""},
    };
    int i = 0;
    for (const auto& c : cases) {
        const std::string message = open_error(dir, fmt::format("case{}", i++), raw_file(c.header, "x"));
        EXPECT_THAT(message, HasSubstr(c.expected)) << c.header;
        EXPECT_THAT(message, HasSubstr("\"t\"")) << "the error must name the tensor: " << c.header;
    }
}

TEST(SafetensorsCorruption, OffsetsAndSizes) {
    TempDir dir;
    // Reversed offsets.
    EXPECT_THAT(open_error(dir, "reversed", raw_file(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", "ab")),
                ::testing::AllOf(HasSubstr("\"t\""), HasSubstr("reversed")));
    // Out of range.
    EXPECT_THAT(open_error(dir, "range", raw_file(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "ab")),
                ::testing::AllOf(HasSubstr("\"t\""), HasSubstr("past the end")));
    // dtype x shape does not match the byte span.
    EXPECT_THAT(open_error(dir, "size", raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd")),
                ::testing::AllOf(HasSubstr("\"t\""), HasSubstr("needs 8 bytes"), HasSubstr("span 4")));
    // An element count that overflows 64 bits.
    EXPECT_THAT(
        open_error(dir, "overflow",
                   raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd")),
        ::testing::AllOf(HasSubstr("\"t\""), HasSubstr("more than 2^64")));
    // Overlap: both tensors name each other.
    EXPECT_THAT(open_error(dir, "overlap",
                           raw_file(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                                    "abcd")),
                ::testing::AllOf(HasSubstr("\"a\""), HasSubstr("\"b\""), HasSubstr("overlaps")));
    // The same range twice.
    EXPECT_THAT(open_error(dir, "alias",
                           raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                                    "ab")),
                HasSubstr("overlaps"));
    // A hole between tensors.
    EXPECT_THAT(open_error(dir, "hole",
                           raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
                                    "abc")),
                ::testing::AllOf(HasSubstr("\"b\""), HasSubstr("belong to no tensor")));
    // Trailing bytes after the last tensor.
    EXPECT_THAT(
        open_error(dir, "trailing", raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "abc")),
        ::testing::AllOf(HasSubstr("last 2 bytes"), HasSubstr("belong to no tensor")));
}

TEST(SafetensorsCorruption, DuplicateNamesAndBadMetadata) {
    TempDir dir;
    EXPECT_THAT(open_error(dir, "dup",
                           raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    "ab")),
                ::testing::AllOf(HasSubstr("\"a\""), HasSubstr("appears twice")));
    EXPECT_THAT(open_error(dir, "meta1", raw_file(R"({"__metadata__":[1]})", "")),
                HasSubstr("\"__metadata__\" must be an object"));
    EXPECT_THAT(open_error(dir, "meta2", raw_file(R"({"__metadata__":{"k":1}})", "")),
                ::testing::AllOf(HasSubstr("\"k\""), HasSubstr("must be a string")));
}

TEST(SafetensorsCorruption, ControlCharactersInNamesStayOnOneLine) {
    TempDir dir;
    const std::string message = open_error(
        dir, "ctl", raw_file("{\"bad\\nname\\u0001\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", ""));
    EXPECT_THAT(message, HasSubstr("bad\\nname\\x01"));
}

TEST(SafetensorsReader, MissingFileIsAnError) {
    TempDir dir;
    EXPECT_THAT(error_of([&] { SafetensorsFile file(dir.file("absent.safetensors")); }),
                HasSubstr("absent.safetensors"));
}

// ---- writer -------------------------------------------------------------------------------------------------

TEST(SafetensorsWriter, RoundTripsEveryDtypeAlignedAndByteExact) {
    TempDir dir;
    SafetensorsWriter writer;
    const std::vector<std::pair<DType, std::vector<std::int64_t>>> tensors = {
        {DType::U8, {3}},  {DType::F64, {2, 2}},    {DType::BF16, {5}}, {DType::F8_E4M3, {7, 3}},
        {DType::F32, {}},  {DType::I16, {1, 1, 3}}, {DType::F16, {0}},  {DType::I64, {1}},
        {DType::I32, {2}}, {DType::F8_E5M2, {9}},   {DType::I8, {4}},   {DType::BOOL, {2}},
    };
    std::vector<std::vector<std::uint8_t>> data;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        std::size_t n = dtype_size(tensors[i].first);
        for (auto d : tensors[i].second) {
            n *= static_cast<std::size_t>(d);
        }
        data.push_back(iota_bytes(n, static_cast<std::uint8_t>(i * 16)));
        writer.add(fmt::format("t{}", i), tensors[i].first, tensors[i].second, data.back());
    }
    writer.set_metadata("format", "pt");
    const std::string path = dir.file("all.safetensors");
    writer.write(path);
    // serialize() produces exactly the bytes of write().
    const auto bytes = writer.serialize();
    EXPECT_EQ(test::read_file(path), std::string(bytes.begin(), bytes.end()));

    SafetensorsFile file(path);
    ASSERT_EQ(file.tensors().size(), tensors.size());
    EXPECT_EQ(file.metadata().at("format"), "pt");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const TensorView& view = file.get(fmt::format("t{}", i));
        EXPECT_EQ(view.dtype, tensors[i].first);
        EXPECT_EQ(view.shape, tensors[i].second);
        EXPECT_EQ(std::vector<std::uint8_t>(view.bytes.begin(), view.bytes.end()), data[i]);
        // Every tensor is aligned to its element size.
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.bytes.data()) % dtype_size(view.dtype), 0u) << view.name;
    }
    // The header is padded to 8 bytes.
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    EXPECT_EQ(header_len % 8, 0u);
}

TEST(SafetensorsWriter, RejectsBadTensors) {
    SafetensorsWriter writer;
    const auto bytes = iota_bytes(4);
    writer.add("a", DType::U8, {4}, bytes);
    EXPECT_THAT(error_of([&] { writer.add("a", DType::U8, {4}, bytes); }), HasSubstr("added twice"));
    EXPECT_THAT(error_of([&] { writer.add("b", DType::F32, {2}, bytes); }), HasSubstr("8 bytes"));
    EXPECT_THAT(error_of([&] { writer.add("c", DType::U8, {-4}, bytes); }), HasSubstr("negative"));
    EXPECT_THAT(error_of([&] { writer.add("__metadata__", DType::U8, {4}, bytes); }), HasSubstr("reserved"));
}

TEST(SafetensorsWriter, ShardedCheckpointRoundTrip) {
    TempDir dir;
    SafetensorsWriter writer;
    std::vector<std::vector<std::uint8_t>> data;
    for (int i = 0; i < 10; ++i) {
        data.push_back(iota_bytes(static_cast<std::size_t>(100 + i * 10), static_cast<std::uint8_t>(i)));
        writer.add_borrowed(fmt::format("layer.{}.weight", i), DType::U8,
                            {static_cast<std::int64_t>(data.back().size())}, data.back());
    }
    const auto shards = writer.write_sharded(dir.path(), 300);
    EXPECT_GT(shards.size(), 3u);
    EXPECT_EQ(shards.front(), fmt::format("model-00001-of-{:05d}.safetensors", shards.size()));

    const SafetensorsIndex index = read_safetensors_index(dir.file("model.safetensors.index.json"));
    EXPECT_EQ(index.weight_map.size(), 10u);
    EXPECT_EQ(index.shards, shards);
    ASSERT_TRUE(index.total_size.has_value());
    EXPECT_EQ(*index.total_size, writer.data_bytes());

    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    EXPECT_TRUE(checkpoint.has_index());
    EXPECT_EQ(checkpoint.shards().size(), shards.size());
    EXPECT_EQ(checkpoint.tensors().size(), 10u);
    for (int i = 0; i < 10; ++i) {
        const TensorView& view = checkpoint.get(fmt::format("layer.{}.weight", i));
        EXPECT_EQ(std::vector<std::uint8_t>(view.bytes.begin(), view.bytes.end()), data[static_cast<std::size_t>(i)]);
    }
    EXPECT_THAT(error_of([&] { (void)checkpoint.get("nope"); }), HasSubstr("\"nope\""));
}

TEST(Checkpoint, OpensSingleFileAndLooseShards) {
    TempDir single;
    SafetensorsWriter a;
    a.add("x", DType::U8, {1}, iota_bytes(1));
    a.write(single.path() / "model.safetensors");
    EXPECT_FALSE(Checkpoint::open(single.path().string()).has_index());
    EXPECT_EQ(Checkpoint::open(single.path().string()).tensors().size(), 1u);

    TempDir loose;
    SafetensorsWriter b;
    b.add("y", DType::U8, {1}, iota_bytes(1));
    a.write(loose.path() / "one.safetensors");
    b.write(loose.path() / "two.safetensors");
    EXPECT_EQ(Checkpoint::open(loose.path().string()).tensors().size(), 2u);

    TempDir none;
    EXPECT_THAT(error_of([&] { (void)Checkpoint::open(none.path().string()); }), HasSubstr("no model.safetensors"));
    EXPECT_THAT(error_of([&] { (void)Checkpoint::open(none.file("missing")); }), HasSubstr("not a directory"));
}

// ---- sharded checkpoints: index and shards must agree -------------------------------------------------------

class ShardedCorruption : public ::testing::Test {
protected:
    void SetUp() override {
        SafetensorsWriter first;
        first.add("a", DType::U8, {2}, iota_bytes(2));
        first.add("b", DType::U8, {2}, iota_bytes(2));
        first.write(dir.path() / "s1.safetensors");
        SafetensorsWriter second;
        second.add("c", DType::U8, {2}, iota_bytes(2));
        second.write(dir.path() / "s2.safetensors");
    }
    void write_index(const std::string& weight_map) {
        test::write_file(dir.file("model.safetensors.index.json"),
                         R"({"metadata":{"total_size":6},"weight_map":)" + weight_map + "}");
    }
    std::string open_error() {
        return error_of([&] { (void)Checkpoint::open(dir.path().string()); });
    }
    TempDir dir;
};

TEST_F(ShardedCorruption, ConsistentIndexOpens) {
    write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"})");
    EXPECT_EQ(Checkpoint::open(dir.path().string()).tensors().size(), 3u);
}

TEST_F(ShardedCorruption, MissingShard) {
    write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s3.safetensors"})");
    EXPECT_THAT(open_error(), ::testing::AllOf(HasSubstr("\"s3.safetensors\""), HasSubstr("is missing")));
}

TEST_F(ShardedCorruption, TensorInIndexAbsentFromItsShard) {
    write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","d":"s2.safetensors"})");
    EXPECT_THAT(open_error(),
                ::testing::AllOf(HasSubstr("\"d\""), HasSubstr("s2.safetensors"), HasSubstr("absent from")));
}

TEST_F(ShardedCorruption, TensorInShardMissingFromIndex) {
    write_index(R"({"a":"s1.safetensors","c":"s2.safetensors"})");
    EXPECT_THAT(open_error(),
                ::testing::AllOf(HasSubstr("\"b\""), HasSubstr("s1.safetensors"), HasSubstr("not listed")));
}

TEST_F(ShardedCorruption, TensorListedUnderTheWrongShard) {
    write_index(R"({"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"})");
    EXPECT_THAT(open_error(), ::testing::AllOf(HasSubstr("\"b\""), HasSubstr("stored in s1.safetensors")));
}

TEST_F(ShardedCorruption, DuplicateAcrossShards) {
    SafetensorsWriter third;
    third.add("a", DType::U8, {2}, iota_bytes(2));
    third.write(dir.path() / "s3.safetensors");
    write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","x":"s3.safetensors"})");
    EXPECT_THAT(open_error(), ::testing::AllOf(HasSubstr("\"a\""), HasSubstr("stored twice"),
                                               HasSubstr("s1.safetensors"), HasSubstr("s3.safetensors")));
    // Without an index, the loose files collide the same way.
    std::filesystem::remove(dir.path() / "model.safetensors.index.json");
    EXPECT_THAT(open_error(), HasSubstr("stored twice"));
}

TEST_F(ShardedCorruption, CorruptShardNamesItsFile) {
    test::write_file(dir.file("s2.safetensors"), "garbage!garbage!");
    write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"})");
    EXPECT_THAT(open_error(), HasSubstr("s2.safetensors"));
}

TEST_F(ShardedCorruption, BadIndexFiles) {
    const std::string index = dir.file("model.safetensors.index.json");
    struct Case {
        std::string text;
        const char* expected;
    };
    const Case cases[] = {
        {"{", "not valid JSON"},
        {"[]", "must be a JSON object"},
        {R"({"metadata":{}})", "\"weight_map\" is missing"},
        {R"({"weight_map":[]})", "\"weight_map\" must be an object"},
        {R"({"weight_map":{"a":1}})", "must be a file name"},
        {R"({"weight_map":{"a":"../s1.safetensors"}})", "not a plain file name"},
        {R"({"weight_map":{"a":"/etc/passwd"}})", "not a plain file name"},
        {R"({"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}})", "appears twice"},
        {R"({"metadata":{"total_size":"x"},"weight_map":{}})", "total_size"},
        {R"({"metadata":7,"weight_map":{}})", "\"metadata\" must be an object"},
    };
    for (const auto& c : cases) {
        test::write_file(index, c.text);
        const std::string message = open_error();
        EXPECT_THAT(message, HasSubstr(c.expected)) << c.text;
        EXPECT_THAT(message, HasSubstr("model.safetensors.index.json")) << c.text;
    }
}

// The fuzz seed corpus is made by an independent Python script (tools/fuzz/make_safetensors_corpus.py): its
// valid_* files must parse and its bad_* files must be rejected with one clear error.
TEST(SafetensorsCorpus, ValidFilesParseAndCorruptFilesAreRejected) {
    const std::filesystem::path corpus = std::filesystem::path(MSA_SOURCE_DIR) / "fuzz/corpus/fuzz_safetensors_header";
    int valid = 0;
    int bad = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        const std::string name = entry.path().filename().string();
        const std::string path = entry.path().string();
        if (name.starts_with("valid_")) {
            EXPECT_NO_THROW(SafetensorsFile file(path)) << name;
            ++valid;
        } else if (name.starts_with("bad_")) {
            EXPECT_THAT(error_of([&] { SafetensorsFile file(path); }), HasSubstr(name)) << name;
            ++bad;
        }
    }
    EXPECT_GE(valid, 5);
    EXPECT_GE(bad, 20);
}

// ---- properties ---------------------------------------------------------------------------------------------

// Random tensors survive the writer and reader unchanged.
RC_GTEST_PROP(SafetensorsProperty, WriterReaderRoundTrip, ()) {
    const auto count = *rc::gen::inRange<int>(0, 8);
    SafetensorsWriter writer;
    std::vector<std::tuple<std::string, DType, std::vector<std::int64_t>, std::vector<std::uint8_t>>> expected;
    for (int i = 0; i < count; ++i) {
        const auto dtype = static_cast<DType>(*rc::gen::inRange<int>(0, 12));
        const auto shape = *rc::gen::container<std::vector<std::int64_t>>(*rc::gen::inRange<int>(0, 4),
                                                                          rc::gen::inRange<std::int64_t>(0, 5));
        std::size_t n = dtype_size(dtype);
        for (auto d : shape) {
            n *= static_cast<std::size_t>(d);
        }
        const auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(n, rc::gen::arbitrary<std::uint8_t>());
        const std::string name = fmt::format("tensor.{}", i);
        writer.add(name, dtype, shape, bytes);
        expected.emplace_back(name, dtype, shape, bytes);
    }
    const auto file = writer.serialize();
    const SafetensorsHeader header = parse_safetensors(file, "memory");
    RC_ASSERT(header.entries.size() == expected.size());
    for (const auto& [name, dtype, shape, bytes] : expected) {
        const std::string& wanted = name;  // clang 14 cannot capture a structured binding
        const auto it = std::find_if(header.entries.begin(), header.entries.end(),
                                     [&](const SafetensorsEntry& e) { return e.name == wanted; });
        RC_ASSERT(it != header.entries.end());
        RC_ASSERT(it->dtype == dtype);
        RC_ASSERT(it->shape == shape);
        const auto* begin = file.data() + header.data_start + it->begin;
        RC_ASSERT(std::vector<std::uint8_t>(begin, begin + (it->end - it->begin)) == bytes);
    }
}

// Any truncation or byte corruption of a valid file either still parses or gives msa::Error; never a crash or a
// read outside the buffer (ASan checks the latter in the sanitizer build).
RC_GTEST_PROP(SafetensorsProperty, CorruptionNeverCrashes, ()) {
    SafetensorsWriter writer;
    writer.add("model.layers.0.w", DType::BF16, {4, 2}, iota_bytes(16));
    writer.add("model.layers.0.s", DType::U8, {3}, iota_bytes(3));
    writer.add("x", DType::F32, {}, iota_bytes(4));
    auto file = writer.serialize();
    const auto flips = *rc::gen::inRange<int>(1, 6);
    for (int i = 0; i < flips; ++i) {
        const auto at = *rc::gen::inRange<std::size_t>(0, file.size());
        file[at] = *rc::gen::arbitrary<std::uint8_t>();
    }
    const auto keep = *rc::gen::inRange<std::size_t>(0, file.size() + 1);
    file.resize(keep);
    // Copy into an exactly sized heap buffer so that ASan catches any read past the end.
    const std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[file.size() + 1]);
    std::copy(file.begin(), file.end(), exact.get());
    try {
        const auto header = parse_safetensors({exact.get(), file.size()}, "corrupt");
        for (const auto& entry : header.entries) {
            RC_ASSERT(header.data_start + entry.end <= file.size());
        }
    } catch (const Error& e) {
        RC_ASSERT(std::string(e.what()).find("corrupt") != std::string::npos);
    }
}

}  // namespace
}  // namespace msa
