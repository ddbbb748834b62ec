// Shared helpers of the tokenizer tests: where the test data lives and how the variants of
// tests/tokenizer/data/variants.json are built (the same edits tools/tokenizer/gen_goldens.mjs applies).
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace msa::test {

inline std::filesystem::path source_dir() { return MSA_SOURCE_DIR; }
inline std::filesystem::path tokenizer_data_dir() { return source_dir() / "tests/tokenizer/data"; }
inline std::filesystem::path node_modules_dir() { return source_dir() / "tests/npm/node_modules"; }
inline std::filesystem::path tiny_tokenizer_path() { return tokenizer_data_dir() / "tiny_tokenizer.json"; }

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
    std::vector<nlohmann::json> rows;
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
    }
    return rows;
}

inline nlohmann::json variants_config() {
    return nlohmann::json::parse(read_file(tokenizer_data_dir() / "variants.json"))["variants"];
}

inline std::vector<std::string> variant_names() {
    std::vector<std::string> names;
    for (const auto& v : variants_config()) names.push_back(v["name"].get<std::string>());
    return names;
}

inline nlohmann::json variant_config(const std::string& name) {
    for (const auto& v : variants_config()) {
        if (v["name"] == name) return v;
    }
    throw std::runtime_error("no variant " + name + " in variants.json");
}

// True when the variant's base file is available (npm packages are installed by scripts/setup.sh --test).
inline bool variant_available(const nlohmann::json& variant) {
    if (variant["base"].contains("npm")) {
        return std::filesystem::exists(node_modules_dir() / variant["base"]["npm"].get<std::string>());
    }
    return true;
}

// The tokenizer.json of a variant: its base file with "set" fields replaced and "append_added_tokens" appended.
inline nlohmann::json variant_tokenizer_json(const nlohmann::json& variant) {
    const auto& base = variant["base"];
    const std::filesystem::path path = base.contains("npm") ? node_modules_dir() / base["npm"].get<std::string>()
                                                            : source_dir() / base["file"].get<std::string>();
    nlohmann::json json = nlohmann::json::parse(read_file(path));
    if (variant.contains("set")) {
        for (const auto& [key, value] : variant["set"].items()) json[key] = value;
    }
    if (variant.contains("append_added_tokens")) {
        for (const auto& token : variant["append_added_tokens"]) {
            std::int64_t max_id = 0;
            for (const auto& t : json["added_tokens"]) max_id = std::max<std::int64_t>(max_id, t["id"]);
            for (const auto& [k, id] : json["model"]["vocab"].items()) max_id = std::max<std::int64_t>(max_id, id);
            nlohmann::json entry = token;
            entry["id"] = max_id + 1;
            json["added_tokens"].push_back(entry);
        }
    }
    return json;
}

}  // namespace msa::test
