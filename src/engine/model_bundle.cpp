#include "engine/model_bundle.h"

#include "core/error.h"
#include "core/log.h"
#include "engine/tokenizer_text_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <system_error>
#include <unistd.h>

namespace msa {
namespace {

namespace fs = std::filesystem;

// Parses a JSON file; nullopt when it does not exist, msa::Error when it is not valid JSON.
std::optional<nlohmann::json> read_json_file(const fs::path& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open {}", path.string());
    auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    MSA_CHECK(!doc.is_discarded(), "{} is not valid JSON", path.string());
    MSA_CHECK(doc.is_object(), "{} is not a JSON object", path.string());
    return doc;
}

// An id or a list of ids (HF allows both for eos_token_id); anything else is an error naming the field.
void append_ids(const nlohmann::json& value, const std::string& where, std::vector<std::int64_t>& out) {
    if (value.is_null()) return;
    if (value.is_number_integer()) {
        out.push_back(value.get<std::int64_t>());
        return;
    }
    MSA_CHECK(value.is_array(), "{} must be a token id or a list of token ids", where);
    for (const auto& v : value) {
        MSA_CHECK(v.is_number_integer(), "{} must be a token id or a list of token ids", where);
        out.push_back(v.get<std::int64_t>());
    }
}

template <typename T>
std::optional<T> number_field(const nlohmann::json& doc, const char* key, const fs::path& file) {
    const auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) return std::nullopt;
    MSA_CHECK(it->is_number(), "{}: \"{}\" must be a number", file.string(), key);
    if constexpr (std::is_integral_v<T>) {
        MSA_CHECK(it->is_number_integer(), "{}: \"{}\" must be an integer", file.string(), key);
    }
    return it->get<T>();
}

GenerationDefaults parse_generation_config(const nlohmann::json& doc, const fs::path& file) {
    GenerationDefaults g;
    g.temperature = number_field<float>(doc, "temperature", file);
    g.top_p = number_field<float>(doc, "top_p", file);
    g.min_p = number_field<float>(doc, "min_p", file);
    g.repetition_penalty = number_field<float>(doc, "repetition_penalty", file);
    g.top_k = number_field<std::int32_t>(doc, "top_k", file);
    g.max_new_tokens = number_field<std::int32_t>(doc, "max_new_tokens", file);
    return g;
}

bool has_chat_template(const fs::path& dir, const std::optional<nlohmann::json>& tokenizer_config) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "chat_template.jinja", ec) || fs::is_regular_file(dir / "chat_template.json", ec)) {
        return true;
    }
    return tokenizer_config && tokenizer_config->contains("chat_template") &&
           !(*tokenizer_config)["chat_template"].is_null();
}

bool has_config(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "config.json", ec);
}

fs::path executable_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

}  // namespace

SamplingParams GenerationDefaults::sampling_params() const {
    SamplingParams p;
    if (temperature) p.temperature = *temperature;
    if (top_p) p.top_p = *top_p;
    if (min_p) p.min_p = *min_p;
    if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
    if (top_k) p.top_k = *top_k;
    if (max_new_tokens) p.max_tokens = *max_new_tokens;
    return p;
}

ModelBundle load_model_bundle(const fs::path& dir) {
    MSA_CHECK(has_config(dir), "{} is not a model directory: it has no config.json", dir.string());
    ModelBundle b;
    b.dir = dir;
    b.name = fs::absolute(dir).lexically_normal().filename().string();
    if (b.name.empty()) b.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
    b.config = load_model_config(dir.string());

    std::error_code ec;
    if (fs::is_regular_file(dir / "tokenizer.json", ec)) {
        auto tok = std::make_shared<const Tokenizer>(Tokenizer::from_file((dir / "tokenizer.json").string()));
        b.text = std::make_shared<const TokenizerTextSource>(*tok);
        b.tokenizer = std::move(tok);
    }
    const auto tokenizer_config = read_json_file(dir / "tokenizer_config.json");
    if (has_chat_template(dir, tokenizer_config)) {
        b.chat_template = std::make_shared<const ChatTemplate>(ChatTemplate::from_model_dir(dir));
    }
    const auto generation_config = read_json_file(dir / "generation_config.json");
    if (generation_config) b.generation = parse_generation_config(*generation_config, dir / "generation_config.json");

    // EOS ids: generation_config.json, config.json, tokenizer_config.json's eos_token, in that order.
    std::vector<std::int64_t> eos;
    if (generation_config && generation_config->contains("eos_token_id")) {
        append_ids((*generation_config)["eos_token_id"], "generation_config.json: eos_token_id", eos);
    }
    if (const auto config = read_json_file(dir / "config.json")) {
        if (config->contains("eos_token_id")) append_ids((*config)["eos_token_id"], "config.json: eos_token_id", eos);
        const auto text = config->find("text_config");
        if (text != config->end() && text->is_object() && text->contains("eos_token_id")) {
            append_ids((*text)["eos_token_id"], "config.json: text_config.eos_token_id", eos);
        }
    }
    if (tokenizer_config && b.tokenizer) {
        const auto it = tokenizer_config->find("eos_token");
        std::string token;
        if (it != tokenizer_config->end() && it->is_string()) token = it->get<std::string>();
        if (it != tokenizer_config->end() && it->is_object() && it->contains("content") &&
            (*it)["content"].is_string()) {
            token = (*it)["content"].get<std::string>();
        }
        if (!token.empty()) {
            const auto id = b.tokenizer->token_to_id(token);
            if (id) {
                eos.push_back(*id);
            } else {
                MSA_LOG_WARN("{}: eos_token {} is not in tokenizer.json; ignored",
                             (dir / "tokenizer_config.json").string(), token);
            }
        }
    }
    for (const std::int64_t id : eos) {
        if (id < 0 || id >= b.config.vocab_size) {
            MSA_LOG_WARN("{}: EOS token id {} is outside the model's vocabulary of {}; ignored", dir.string(), id,
                         b.config.vocab_size);
            continue;
        }
        const auto id32 = static_cast<std::int32_t>(id);
        if (std::find(b.eos_token_ids.begin(), b.eos_token_ids.end(), id32) == b.eos_token_ids.end()) {
            b.eos_token_ids.push_back(id32);
        }
    }
    return b;
}

std::vector<fs::path> default_model_roots() {
    std::vector<fs::path> roots{fs::current_path() / "models"};
#ifdef MSA_SOURCE_DIR
    roots.push_back(fs::path(MSA_SOURCE_DIR) / "models");
#endif
    const fs::path exe = executable_dir();
    if (!exe.empty()) roots.push_back(exe.parent_path() / "models");
    return roots;
}

std::optional<fs::path> find_default_model_dir(const std::vector<fs::path>& roots) {
    for (const fs::path& root : roots) {
        std::error_code ec;
        if (!fs::is_directory(root, ec)) continue;
        std::vector<fs::path> candidates;
        for (const auto& entry : fs::directory_iterator(root, ec)) {
            if (entry.is_directory(ec) && has_config(entry.path())) candidates.push_back(entry.path());
        }
        if (!candidates.empty()) return *std::min_element(candidates.begin(), candidates.end());
    }
    return std::nullopt;
}

fs::path resolve_model_dir(const std::string& flag) {
    if (!flag.empty()) {
        MSA_CHECK(has_config(flag), "{} is not a model directory: it has no config.json", flag);
        return flag;
    }
    const auto roots = default_model_roots();
    if (auto found = find_default_model_dir(roots)) return *found;
    std::string where;
    for (const auto& r : roots) where += (where.empty() ? "" : ", ") + r.string();
    fail("no --model given and no default model found (looked for a directory with config.json under {})",
              where);
}

}  // namespace msa
