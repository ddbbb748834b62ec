// Writing safetensors files and sharded checkpoints (for tools, generators and tests).
//
// Output follows the format exactly: 8-byte little-endian header length, JSON header padded with spaces to a
// multiple of 8 bytes, then the tensors back to back with no holes. Tensors are laid out by decreasing element
// size, then by name, so that every tensor starts at an offset aligned to its element size (TensorView::as<T>()
// then works on every tensor of a file we wrote).
#pragma once

#include "formats/dtype.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace msa {

class SafetensorsWriter {
public:
    // Adds a tensor, copying its bytes. Throws msa::Error when the name is already present, a dimension is
    // negative, or bytes.size() != dtype size x element count.
    void add(std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const std::uint8_t> bytes);
    // Same, without copying: `bytes` must stay alive until the last write call.
    void add_borrowed(std::string name, DType dtype, std::vector<std::int64_t> shape,
                      std::span<const std::uint8_t> bytes);
    // Convenience for typed host data (sizeof(T) must equal the dtype's size).
    template <typename T>
    void add_typed(std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const T> values) {
        add(std::move(name), dtype, std::move(shape),
            std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()));
    }

    void set_metadata(std::string key, std::string value);

    std::size_t num_tensors() const { return tensors_.size(); }
    // Sum of all tensor bytes.
    std::uint64_t data_bytes() const;

    // The whole file in memory.
    std::vector<std::uint8_t> serialize() const;
    // Writes one file (throws msa::Error naming the path when it cannot be written).
    void write(const std::filesystem::path& path) const;
    // Writes `model-0000i-of-0000n.safetensors` shards of at most `max_shard_bytes` of tensor data each (a larger
    // tensor gets a shard of its own; tensors go to shards in name order) plus `model.safetensors.index.json`.
    // With one shard, still writes the index (use write() for a lone `model.safetensors`).
    // Returns the shard file names.
    std::vector<std::string> write_sharded(const std::filesystem::path& dir, std::uint64_t max_shard_bytes) const;

private:
    struct Tensor {
        std::string name;
        DType dtype;
        std::vector<std::int64_t> shape;
        std::vector<std::uint8_t> owned;
        std::span<const std::uint8_t> bytes;
    };
    void add_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const std::uint8_t> bytes,
                    bool copy);
    std::vector<const Tensor*> all_tensors() const;
    void write_subset(const std::filesystem::path& path, const std::vector<const Tensor*>& subset) const;

    std::vector<Tensor> tensors_;
    std::map<std::string, std::size_t> by_name_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace msa
