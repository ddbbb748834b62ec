#include "formats/safetensors_writer.h"

#include "core/error.h"
#include "formats/message_text.h"
#include "formats/safetensors_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace msa {

namespace {

using nlohmann::json;

void put_u64_le(std::uint64_t value, std::uint8_t* out) {
    for (int i = 0; i < 8; ++i) {
        out[i] = static_cast<std::uint8_t>(value >> (8 * i));
    }
}

}  // namespace

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                            std::span<const std::uint8_t> bytes) {
    add_tensor(std::move(name), dtype, std::move(shape), bytes, true);
}

void SafetensorsWriter::add_borrowed(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                     std::span<const std::uint8_t> bytes) {
    add_tensor(std::move(name), dtype, std::move(shape), bytes, false);
}

void SafetensorsWriter::add_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                   std::span<const std::uint8_t> bytes, bool copy) {
    MSA_CHECK(name != "__metadata__", "safetensors writer: \"__metadata__\" is reserved and cannot name a tensor");
    MSA_CHECK(by_name_.count(name) == 0, "safetensors writer: tensor {} added twice", quote_text(name));
    std::uint64_t numel = 1;
    for (auto d : shape) {
        MSA_CHECK(d >= 0, "safetensors writer: tensor {} has a negative dimension in {}", quote_text(name),
                  format_shape(shape));
        numel *= static_cast<std::uint64_t>(d);
    }
    MSA_CHECK(numel * dtype_size(dtype) == bytes.size(),
              "safetensors writer: tensor {} is {} {} ({} bytes) but {} bytes were given", quote_text(name),
              dtype_name(dtype), format_shape(shape), numel * dtype_size(dtype), bytes.size());
    Tensor tensor{std::move(name), dtype, std::move(shape), {}, bytes};
    if (copy) {
        tensor.owned.assign(bytes.begin(), bytes.end());
        tensor.bytes = tensor.owned;
    }
    by_name_.emplace(tensor.name, tensors_.size());
    tensors_.push_back(std::move(tensor));
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
    metadata_[std::move(key)] = std::move(value);
}

std::uint64_t SafetensorsWriter::data_bytes() const {
    std::uint64_t total = 0;
    for (const auto& tensor : tensors_) {
        total += tensor.bytes.size();
    }
    return total;
}

namespace {

// Layout order: larger elements first (keeps every tensor aligned to its element size), then by name.
template <typename Tensor>
std::vector<const Tensor*> layout_order(std::vector<const Tensor*> tensors) {
    std::sort(tensors.begin(), tensors.end(), [](const Tensor* a, const Tensor* b) {
        const auto sa = dtype_size(a->dtype);
        const auto sb = dtype_size(b->dtype);
        return sa != sb ? sa > sb : a->name < b->name;
    });
    return tensors;
}

// The JSON header of the given tensors (already in layout order), padded with spaces so that the data region
// starts 8-byte aligned.
template <typename Tensor>
std::string header_text(const std::vector<const Tensor*>& ordered, const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) {
        header["__metadata__"] = metadata;
    }
    std::uint64_t offset = 0;
    for (const Tensor* tensor : ordered) {
        header[tensor->name] = {{"dtype", std::string(dtype_name(tensor->dtype))},
                                {"shape", tensor->shape},
                                {"data_offsets", {offset, offset + tensor->bytes.size()}}};
        offset += tensor->bytes.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

}  // namespace

void SafetensorsWriter::write_subset(const std::filesystem::path& path,
                                     const std::vector<const Tensor*>& subset) const {
    const auto ordered = layout_order(subset);
    const std::string text = header_text(ordered, metadata_);

    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    MSA_CHECK(out.good(), "cannot create {}", path.string());
    std::uint8_t prefix[8];
    put_u64_le(text.size(), prefix);
    out.write(reinterpret_cast<const char*>(prefix), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor* tensor : ordered) {
        out.write(reinterpret_cast<const char*>(tensor->bytes.data()),
                  static_cast<std::streamsize>(tensor->bytes.size()));
    }
    out.close();
    MSA_CHECK(!out.fail(), "cannot write {}", path.string());
}

std::vector<std::uint8_t> SafetensorsWriter::serialize() const {
    const auto ordered = layout_order(all_tensors());
    const std::string text = header_text(ordered, metadata_);
    std::vector<std::uint8_t> out(8 + text.size());
    put_u64_le(text.size(), out.data());
    std::copy(text.begin(), text.end(), out.begin() + 8);
    for (const Tensor* tensor : ordered) {
        out.insert(out.end(), tensor->bytes.begin(), tensor->bytes.end());
    }
    return out;
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
    write_subset(path, all_tensors());
}

std::vector<const SafetensorsWriter::Tensor*> SafetensorsWriter::all_tensors() const {
    std::vector<const Tensor*> all;
    for (const auto& tensor : tensors_) {
        all.push_back(&tensor);
    }
    return all;
}

std::vector<std::string> SafetensorsWriter::write_sharded(const std::filesystem::path& dir,
                                                          std::uint64_t max_shard_bytes) const {
    MSA_CHECK(max_shard_bytes > 0, "safetensors writer: the shard size limit must be positive");
    std::vector<const Tensor*> by_name;
    for (const auto& [name, i] : by_name_) {
        by_name.push_back(&tensors_[i]);
    }
    std::vector<std::vector<const Tensor*>> shards;
    std::uint64_t current = 0;
    for (const Tensor* tensor : by_name) {
        if (shards.empty() || (current > 0 && current + tensor->bytes.size() > max_shard_bytes)) {
            shards.emplace_back();
            current = 0;
        }
        shards.back().push_back(tensor);
        current += tensor->bytes.size();
    }
    if (shards.empty()) {
        shards.emplace_back();
    }
    std::vector<std::string> names;
    json weight_map = json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
        names.push_back(fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size()));
        write_subset(dir / names.back(), shards[i]);
        for (const Tensor* tensor : shards[i]) {
            weight_map[tensor->name] = names.back();
        }
    }
    const json index = {{"metadata", {{"total_size", data_bytes()}}}, {"weight_map", weight_map}};
    const auto index_path = dir / kSafetensorsIndexFile;
    std::ofstream out(index_path, std::ios::trunc);
    MSA_CHECK(out.good(), "cannot create {}", index_path.string());
    out << index.dump(2) << '\n';
    out.close();
    MSA_CHECK(!out.fail(), "cannot write {}", index_path.string());
    return names;
}

}  // namespace msa
