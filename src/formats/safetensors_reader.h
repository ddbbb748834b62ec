// Reading safetensors checkpoints: one file (SafetensorsFile) or a whole model directory, sharded through
// `model.safetensors.index.json` (Checkpoint). Files are memory-mapped and never copied; a TensorView is a typed,
// zero-copy window onto one tensor's bytes inside its mapping.
//
// The file format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes of
// JSON, then the data region. The JSON is an object mapping each tensor name to
// {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]} (offsets relative to the data region), plus an
// optional "__metadata__" object of string values. Validation is strict: the tensors must tile the data region
// exactly (no holes, no overlap, nothing past the end), byte sizes must equal dtype size x element count, names are
// unique (within a file and across the shards of a checkpoint). Every violation throws msa::Error naming the file
// and, where there is one, the tensor.
#pragma once

#include "core/mapped_file.h"
#include "formats/dtype.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace msa {

// Largest header we accept (the reference implementation's limit too): a corrupt length cannot make us parse GBs.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

// One tensor's entry in a safetensors header, validated (offsets relative to the data region).
struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::U8;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

struct SafetensorsHeader {
    // Sorted by data offset (the order of the bytes in the file).
    std::vector<SafetensorsEntry> entries;
    std::map<std::string, std::string> metadata;
    // Where the data region starts in the file: 8 + header length.
    std::uint64_t data_start = 0;
};

// Parses and validates a whole safetensors file held in memory (length prefix, header, data-region bounds).
// `file` is only used in error messages. This is the entry point of the fuzz target; it never reads outside
// `bytes` and throws msa::Error for every malformed input.
SafetensorsHeader parse_safetensors(std::span<const std::uint8_t> bytes, std::string_view file);

// A typed, zero-copy view of one tensor inside a mapped file. Valid as long as the SafetensorsFile (or
// Checkpoint) it came from is alive.
struct TensorView {
    std::string name;
    DType dtype = DType::U8;
    std::vector<std::int64_t> shape;
    std::span<const std::uint8_t> bytes;
    // Path of the file holding the tensor (for error messages); points into the owning SafetensorsFile.
    std::string_view file;

    std::int64_t numel() const;
    std::size_t rank() const { return shape.size(); }
    const void* data() const { return bytes.data(); }

    // The elements as T. Throws msa::Error naming the tensor when sizeof(T) differs from the dtype's size or the
    // data is not aligned for T (the writer aligns every tensor; files from elsewhere normally are aligned too).
    template <typename T>
    std::span<const T> as() const {
        check_element_type(sizeof(T), alignof(T));
        return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
    }

    // "name [d0, d1] DTYPE in FILE": for messages.
    std::string describe() const;

private:
    void check_element_type(std::size_t size, std::size_t alignment) const;
};

// "[d0, d1, ...]": how shapes appear in error messages and in `msa info`.
std::string format_shape(std::span<const std::int64_t> shape);

// One memory-mapped (or, with `load`, copied into huge pages: core/mapped_file.h), validated safetensors file. Not
// movable: views point into it.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path, MappedFile::Load load = MappedFile::Load::map);
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return file_.path(); }
    std::uint64_t file_size() const { return file_.size(); }
    // Tensors in data-offset order.
    const std::vector<TensorView>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // nullptr when absent.
    const TensorView* find(std::string_view name) const;
    // Throws msa::Error naming the file and the tensor when absent.
    const TensorView& get(std::string_view name) const;

private:
    MappedFile file_;
    std::vector<TensorView> tensors_;
    std::unordered_map<std::string_view, std::size_t> by_name_;
    std::map<std::string, std::string> metadata_;
};

inline constexpr std::string_view kSafetensorsIndexFile = "model.safetensors.index.json";
inline constexpr std::string_view kSafetensorsSingleFile = "model.safetensors";

// The parsed `model.safetensors.index.json`: tensor name -> shard file name (relative to the directory).
struct SafetensorsIndex {
    std::map<std::string, std::string> weight_map;
    // Distinct shard file names in sorted order.
    std::vector<std::string> shards;
    // metadata.total_size when present (informative; not checked against the shards).
    std::optional<std::uint64_t> total_size;
};

// Parses an index file's text; `file` names it in errors. Rejects bad JSON, missing or mistyped fields, duplicate
// tensor names, and shard names that are not plain file names inside the directory (absolute, "..", "/").
SafetensorsIndex parse_safetensors_index(std::string_view json, std::string_view file);
SafetensorsIndex read_safetensors_index(const std::string& path);

// All tensors of a model directory. Opening rules, in order:
//   1. `model.safetensors.index.json` present: every shard it names must exist and hold exactly the tensors the
//      index assigns to it (a tensor missing from its shard, or a shard tensor absent from the index, is an error);
//   2. else `model.safetensors`;
//   3. else every `*.safetensors` file in the directory (sorted by name).
// A tensor name present in two shards is an error naming both files.
class Checkpoint {
public:
    // `load`: how each shard's bytes are brought into memory (MappedFile::Load).
    static Checkpoint open(const std::string& dir, MappedFile::Load load = MappedFile::Load::map);
    // A checkpoint made of the given files (no index).
    static Checkpoint open_files(const std::vector<std::string>& paths, MappedFile::Load load = MappedFile::Load::map);

    Checkpoint(Checkpoint&&) noexcept = default;
    Checkpoint& operator=(Checkpoint&&) noexcept = default;

    const std::string& dir() const { return dir_; }
    const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
    // Every tensor of every shard, shard by shard in file order.
    const std::vector<const TensorView*>& tensors() const { return tensors_; }
    bool has_index() const { return has_index_; }

    const TensorView* find(std::string_view name) const;
    // Throws msa::Error naming the checkpoint directory and the tensor when absent.
    const TensorView& get(std::string_view name) const;

private:
    Checkpoint() = default;
    void add_shard(std::unique_ptr<SafetensorsFile> shard);

    std::string dir_;
    bool has_index_ = false;
    std::vector<std::unique_ptr<SafetensorsFile>> shards_;
    std::vector<const TensorView*> tensors_;
    std::unordered_map<std::string_view, const TensorView*> by_name_;
};

}  // namespace msa
