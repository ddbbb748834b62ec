#include "formats/safetensors_reader.h"

#include "core/error.h"
#include "formats/message_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace msa {

namespace {

using nlohmann::json;

std::string supported_dtypes() {
    std::string names;
    for (DType dtype : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::I64,
                        DType::I32, DType::I16, DType::I8, DType::U8, DType::BOOL}) {
        if (!names.empty()) {
            names += ", ";
        }
        names += dtype_name(dtype);
    }
    return names;
}

// Safetensors headers and index files nest three levels deep; anything far deeper is corrupt, and refusing it
// before parsing keeps a hostile header from building millions of nested JSON values.
constexpr int kMaxJsonDepth = 32;

void check_json_depth(std::string_view text, std::string_view file, std::string_view what) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            MSA_CHECK(++depth <= kMaxJsonDepth, "{}: {} nests JSON deeper than {} levels", file, what, kMaxJsonDepth);
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
}

// Parses JSON text, reporting the first duplicate key of the top-level object (or of the object under
// `nested_key`, for the index's weight_map) in `duplicate`. Converts parse errors into msa::Error.
json parse_json_checking_duplicates(std::string_view text, std::string_view file, std::string_view what,
                                    std::string_view nested_key, std::string& duplicate) {
    std::set<std::string> top_keys;
    std::set<std::string> nested_keys;
    std::string current_top;
    auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && duplicate.empty()) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (depth == 1) {
                current_top = key;
                if (nested_key.empty() && !top_keys.insert(key).second) {
                    duplicate = key;
                }
            } else if (depth == 2 && !nested_key.empty() && current_top == nested_key &&
                       !nested_keys.insert(key).second) {
                duplicate = key;
            }
        }
        return true;
    };
    check_json_depth(text, file, what);
    try {
        return json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
        fail("{}: {} is not valid JSON: {}", file, what, printable(e.what()));
    }
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i) {
        value = (value << 8) | p[i];
    }
    return value;
}

// Reads a JSON integer >= 0 (a float or negative number is an error naming `field`).
std::uint64_t read_index_value(const json& value, std::string_view file, const std::string& tensor,
                               std::string_view field) {
    MSA_CHECK(value.is_number_unsigned(), "{}: tensor {}: {} must hold non-negative integers, found {}", file,
              quote_text(tensor), field, json_kind(value));
    return value.get<std::uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, std::uint64_t data_size,
                             std::string_view file) {
    const std::string tensor = quote_text(name);
    MSA_CHECK(value.is_object(), "{}: tensor {}: header entry must be an object, found {}", file, tensor,
              json_kind(value));
    SafetensorsEntry entry;
    entry.name = name;

    const auto dtype_it = value.find("dtype");
    MSA_CHECK(dtype_it != value.end(), "{}: tensor {}: field \"dtype\" is missing", file, tensor);
    MSA_CHECK(dtype_it->is_string(), "{}: tensor {}: field \"dtype\" must be a string, found {}", file, tensor,
              json_kind(*dtype_it));
    const auto& dtype_text = dtype_it->get_ref<const std::string&>();
    const auto dtype = parse_dtype(dtype_text);
    MSA_CHECK(dtype.has_value(), "{}: tensor {}: unknown dtype {} (supported: {})", file, tensor,
              quote_text(dtype_text), supported_dtypes());
    entry.dtype = *dtype;

    const auto shape_it = value.find("shape");
    MSA_CHECK(shape_it != value.end(), "{}: tensor {}: field \"shape\" is missing", file, tensor);
    MSA_CHECK(shape_it->is_array(), "{}: tensor {}: field \"shape\" must be an array, found {}", file, tensor,
              json_kind(*shape_it));
    std::uint64_t numel = 1;
    bool overflow = false;
    for (const auto& dim : *shape_it) {
        const std::uint64_t d = read_index_value(dim, file, name, "\"shape\"");
        MSA_CHECK(d <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                  "{}: tensor {}: dimension {} is too large", file, tensor, d);
        entry.shape.push_back(static_cast<std::int64_t>(d));
        if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / d) {
            overflow = true;
        }
        numel *= d;
    }

    const auto offsets_it = value.find("data_offsets");
    MSA_CHECK(offsets_it != value.end(), "{}: tensor {}: field \"data_offsets\" is missing", file, tensor);
    MSA_CHECK(offsets_it->is_array() && offsets_it->size() == 2,
              "{}: tensor {}: field \"data_offsets\" must be an array [begin, end], found {}", file, tensor,
              offsets_it->is_array() ? fmt::format("an array of {} elements", offsets_it->size())
                                     : std::string(json_kind(*offsets_it)));
    entry.begin = read_index_value((*offsets_it)[0], file, name, "\"data_offsets\"");
    entry.end = read_index_value((*offsets_it)[1], file, name, "\"data_offsets\"");
    MSA_CHECK(entry.begin <= entry.end, "{}: tensor {}: data_offsets [{}, {}] are reversed (begin after end)", file,
              tensor, entry.begin, entry.end);
    MSA_CHECK(entry.end <= data_size,
              "{}: tensor {}: data_offsets [{}, {}] run past the end of the data region ({} bytes)", file, tensor,
              entry.begin, entry.end, data_size);

    const std::uint64_t element_size = dtype_size(entry.dtype);
    const bool size_overflow = overflow || (numel > std::numeric_limits<std::uint64_t>::max() / element_size);
    const std::uint64_t expected = size_overflow ? 0 : numel * element_size;
    MSA_CHECK(!size_overflow && expected == entry.end - entry.begin,
              "{}: tensor {}: {} {} needs {} bytes but data_offsets [{}, {}] span {}", file, tensor,
              dtype_name(entry.dtype), format_shape(entry.shape),
              size_overflow ? std::string("more than 2^64") : std::to_string(expected), entry.begin, entry.end,
              entry.end - entry.begin);
    return entry;
}

void parse_metadata(const json& value, std::string_view file, std::map<std::string, std::string>& metadata) {
    MSA_CHECK(value.is_object(), "{}: \"__metadata__\" must be an object of strings, found {}", file, json_kind(value));
    for (const auto& [key, item] : value.items()) {
        MSA_CHECK(item.is_string(), "{}: \"__metadata__\" entry {} must be a string, found {}", file, quote_text(key),
                  json_kind(item));
        metadata.emplace(key, item.get<std::string>());
    }
}

// The tensors, sorted by offset, must tile [0, data_size) exactly.
void check_tiling(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_size, std::string_view file) {
    std::uint64_t expected = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const auto& entry : entries) {
        if (entry.begin < expected) {
            fail("{}: tensor {} (bytes [{}, {})) overlaps tensor {} (bytes [{}, {}))", file, quote_text(entry.name),
                 entry.begin, entry.end, quote_text(previous->name), previous->begin, previous->end);
        }
        MSA_CHECK(entry.begin == expected,
                  "{}: bytes [{}, {}) of the data region belong to no tensor (a hole before tensor {}); "
                  "safetensors requires the tensors to cover the data region exactly",
                  file, expected, entry.begin, quote_text(entry.name));
        expected = entry.end;
        previous = &entry;
    }
    MSA_CHECK(expected == data_size,
              "{}: the last {} bytes of the data region (from offset {}) belong to no tensor; safetensors requires "
              "the tensors to cover the data region exactly",
              file, data_size - expected, expected);
}

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const std::uint8_t> bytes, std::string_view file) {
    MSA_CHECK(bytes.size() >= 8, "{}: {} bytes is too short for a safetensors file (8-byte header length missing)",
              file, bytes.size());
    const std::uint64_t header_len = read_u64_le(bytes.data());
    MSA_CHECK(header_len <= bytes.size() - 8, "{}: header length {} is larger than the file ({} bytes)", file,
              header_len, bytes.size());
    MSA_CHECK(header_len <= kSafetensorsMaxHeaderBytes, "{}: header length {} exceeds the limit of {} bytes", file,
              header_len, kSafetensorsMaxHeaderBytes);
    MSA_CHECK(header_len >= 2, "{}: header length {} is too small for a JSON object", file, header_len);

    SafetensorsHeader header;
    header.data_start = 8 + header_len;
    const std::uint64_t data_size = bytes.size() - header.data_start;
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);

    std::string duplicate;
    const json document = parse_json_checking_duplicates(text, file, "the header", "", duplicate);
    MSA_CHECK(document.is_object(), "{}: the header must be a JSON object, found {}", file, json_kind(document));
    MSA_CHECK(duplicate.empty(), "{}: tensor {} appears twice in the header", file, quote_text(duplicate));

    for (const auto& [name, value] : document.items()) {
        if (name == "__metadata__") {
            parse_metadata(value, file, header.metadata);
            continue;
        }
        header.entries.push_back(parse_entry(name, value, data_size, file));
    }
    std::sort(header.entries.begin(), header.entries.end(),
              [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    check_tiling(header.entries, data_size, file);
    return header;
}

// ---- TensorView ---------------------------------------------------------------------------------------------

std::int64_t TensorView::numel() const {
    std::int64_t n = 1;
    for (auto d : shape) {
        n *= d;
    }
    return n;
}

std::string TensorView::describe() const {
    return fmt::format("{} {} {} in {}", quote_text(name), format_shape(shape), dtype_name(dtype), file);
}

void TensorView::check_element_type(std::size_t size, std::size_t alignment) const {
    MSA_CHECK(size == dtype_size(dtype), "{}: tensor {} is {} ({} bytes per element), not viewable as a {}-byte type",
              file, quote_text(name), dtype_name(dtype), dtype_size(dtype), size);
    MSA_CHECK(reinterpret_cast<std::uintptr_t>(bytes.data()) % alignment == 0,
              "{}: tensor {} is not aligned to {} bytes in the file; it cannot be viewed in place", file,
              quote_text(name), alignment);
}

std::string format_shape(std::span<const std::int64_t> shape) {
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) {
            out += ", ";
        }
        out += std::to_string(shape[i]);
    }
    return out + "]";
}

// ---- SafetensorsFile ----------------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path, MappedFile::Load load) : file_(path, load) {
    SafetensorsHeader header = parse_safetensors(file_.bytes(), file_.path());
    metadata_ = std::move(header.metadata);
    tensors_.reserve(header.entries.size());
    for (auto& entry : header.entries) {
        TensorView view;
        view.name = std::move(entry.name);
        view.dtype = entry.dtype;
        view.shape = std::move(entry.shape);
        const std::size_t begin = header.data_start + entry.begin;
        view.bytes = file_.bytes().subspan(begin, entry.end - entry.begin);
        view.file = file_.path();
        tensors_.push_back(std::move(view));
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
        by_name_.emplace(tensors_[i].name, i);
    }
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& SafetensorsFile::get(std::string_view name) const {
    const TensorView* view = find(name);
    MSA_CHECK(view != nullptr, "{}: tensor {} is not in this file", path(), quote_text(name));
    return *view;
}

// ---- index --------------------------------------------------------------------------------------------------

SafetensorsIndex parse_safetensors_index(std::string_view text, std::string_view file) {
    std::string duplicate;
    const json document = parse_json_checking_duplicates(text, file, "the index", "weight_map", duplicate);
    MSA_CHECK(document.is_object(), "{}: the index must be a JSON object, found {}", file, json_kind(document));
    MSA_CHECK(duplicate.empty(), "{}: tensor {} appears twice in \"weight_map\"", file, quote_text(duplicate));

    SafetensorsIndex index;
    if (const auto metadata = document.find("metadata"); metadata != document.end() && !metadata->is_null()) {
        MSA_CHECK(metadata->is_object(), "{}: \"metadata\" must be an object, found {}", file, json_kind(*metadata));
        if (const auto total = metadata->find("total_size"); total != metadata->end()) {
            MSA_CHECK(total->is_number() && total->get<double>() >= 0,
                      "{}: \"metadata.total_size\" must be a non-negative number, found {}", file, json_kind(*total));
            index.total_size = total->is_number_unsigned() ? total->get<std::uint64_t>()
                                                           : static_cast<std::uint64_t>(total->get<double>());
        }
    }
    const auto weight_map = document.find("weight_map");
    MSA_CHECK(weight_map != document.end(), "{}: field \"weight_map\" is missing", file);
    MSA_CHECK(weight_map->is_object(), "{}: \"weight_map\" must be an object, found {}", file, json_kind(*weight_map));
    std::set<std::string> shards;
    for (const auto& [name, shard] : weight_map->items()) {
        MSA_CHECK(shard.is_string(), "{}: \"weight_map\" entry for tensor {} must be a file name, found {}", file,
                  quote_text(name), json_kind(shard));
        const auto& shard_name = shard.get_ref<const std::string&>();
        MSA_CHECK(!shard_name.empty() && shard_name != "." && shard_name != ".." &&
                      shard_name.find('/') == std::string::npos && shard_name.find('\\') == std::string::npos &&
                      shard_name.find('\0') == std::string::npos,
                  "{}: tensor {} is mapped to {}, which is not a plain file name in the model directory", file,
                  quote_text(name), quote_text(shard_name));
        index.weight_map.emplace(name, shard_name);
        shards.insert(shard_name);
    }
    index.shards.assign(shards.begin(), shards.end());
    return index;
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open {}", path);
    std::ostringstream text;
    text << in.rdbuf();
    MSA_CHECK(!in.bad(), "cannot read {}", path);
    return parse_safetensors_index(text.str(), path);
}

// ---- Checkpoint ---------------------------------------------------------------------------------------------

void Checkpoint::add_shard(std::unique_ptr<SafetensorsFile> shard) {
    for (const auto& tensor : shard->tensors()) {
        const auto [it, inserted] = by_name_.emplace(tensor.name, &tensor);
        MSA_CHECK(inserted, "{}: tensor {} is stored twice: in {} and in {}", dir_.empty() ? "checkpoint" : dir_,
                  quote_text(tensor.name), it->second->file, tensor.file);
        tensors_.push_back(&tensor);
    }
    shards_.push_back(std::move(shard));
}

Checkpoint Checkpoint::open(const std::string& dir, MappedFile::Load load) {
    namespace fs = std::filesystem;
    std::error_code ec;
    MSA_CHECK(fs::is_directory(dir, ec), "{} is not a directory", dir);
    Checkpoint checkpoint;
    checkpoint.dir_ = dir;

    const fs::path index_path = fs::path(dir) / kSafetensorsIndexFile;
    if (fs::exists(index_path, ec)) {
        checkpoint.has_index_ = true;
        const SafetensorsIndex index = read_safetensors_index(index_path.string());
        for (const auto& shard : index.shards) {
            const fs::path shard_path = fs::path(dir) / shard;
            MSA_CHECK(fs::is_regular_file(shard_path, ec), "{}: shard {} listed in {} is missing", dir,
                      quote_text(shard), kSafetensorsIndexFile);
        }
        for (const auto& shard : index.shards) {
            checkpoint.add_shard(std::make_unique<SafetensorsFile>((fs::path(dir) / shard).string(), load));
        }
        // Every shard tensor must be in the index under its own shard, and every index entry in its shard.
        for (const auto* tensor : checkpoint.tensors_) {
            const auto it = index.weight_map.find(tensor->name);
            MSA_CHECK(it != index.weight_map.end(), "{}: tensor {} is not listed in {}", tensor->file,
                      quote_text(tensor->name), kSafetensorsIndexFile);
            MSA_CHECK(fs::path(tensor->file).filename() == it->second,
                      "{}: tensor {} is stored in {} but {} lists it in {}", dir, quote_text(tensor->name),
                      fs::path(tensor->file).filename().string(), kSafetensorsIndexFile, quote_text(it->second));
        }
        for (const auto& [name, shard] : index.weight_map) {
            MSA_CHECK(checkpoint.by_name_.count(name) != 0, "{}: tensor {} listed in {} is absent from that shard",
                      (fs::path(dir) / shard).string(), quote_text(name), kSafetensorsIndexFile);
        }
        return checkpoint;
    }

    const fs::path single = fs::path(dir) / kSafetensorsSingleFile;
    std::vector<std::string> files;
    if (fs::exists(single, ec)) {
        files.push_back(single.string());
    } else {
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) {
                files.push_back(entry.path().string());
            }
        }
        std::sort(files.begin(), files.end());
    }
    MSA_CHECK(!files.empty(), "{}: no {}, {} or *.safetensors file found", dir, kSafetensorsIndexFile,
              kSafetensorsSingleFile);
    for (const auto& file : files) {
        checkpoint.add_shard(std::make_unique<SafetensorsFile>(file, load));
    }
    return checkpoint;
}

Checkpoint Checkpoint::open_files(const std::vector<std::string>& paths, MappedFile::Load load) {
    Checkpoint checkpoint;
    for (const auto& path : paths) {
        checkpoint.add_shard(std::make_unique<SafetensorsFile>(path, load));
    }
    return checkpoint;
}

const TensorView* Checkpoint::find(std::string_view name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::get(std::string_view name) const {
    const TensorView* view = find(name);
    MSA_CHECK(view != nullptr, "{}: tensor {} is not in the checkpoint", dir_.empty() ? "checkpoint" : dir_,
              quote_text(name));
    return *view;
}

}  // namespace msa
