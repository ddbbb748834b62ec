#include "model/model_config.h"

#include "core/error.h"
#include "formats/message_text.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace msa {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; every error names the field by its full path ("text_config.head_dim").
class Fields {
public:
    Fields(const json& object, std::string path, std::string_view source)
        : object_(object), path_(std::move(path)), source_(source) {}

    std::string name(std::string_view field) const { return path_ + std::string(field); }
    const std::string& path() const { return path_; }
    std::string_view source() const { return source_; }

    // The value, or nullptr when absent or null.
    const json* find(std::string_view field) const {
        const auto it = object_.find(field);
        return (it == object_.end() || it->is_null()) ? nullptr : &*it;
    }
    bool has(std::string_view field) const { return find(field) != nullptr; }

    const json& require(std::string_view field) const {
        const json* value = find(field);
        MSA_CHECK(value != nullptr, "{}: {} is missing", source_, name(field));
        return *value;
    }

    std::int64_t integer(std::string_view field) const { return to_integer(require(field), field); }
    std::int64_t integer_or(std::string_view field, std::int64_t fallback) const {
        const json* value = find(field);
        return value == nullptr ? fallback : to_integer(*value, field);
    }
    int int32(std::string_view field) const { return narrow(integer(field), field); }
    int int32_or(std::string_view field, int fallback) const { return narrow(integer_or(field, fallback), field); }

    double number(std::string_view field) const { return to_number(require(field), field); }
    double number_or(std::string_view field, double fallback) const {
        const json* value = find(field);
        return value == nullptr ? fallback : to_number(*value, field);
    }

    bool boolean(std::string_view field) const { return to_boolean(require(field), field); }
    bool boolean_or(std::string_view field, bool fallback) const {
        const json* value = find(field);
        return value == nullptr ? fallback : to_boolean(*value, field);
    }

    std::string string(std::string_view field) const { return to_string(require(field), field); }
    std::string string_or(std::string_view field, std::string fallback) const {
        const json* value = find(field);
        return value == nullptr ? fallback : to_string(*value, field);
    }

    std::vector<int> int_array(std::string_view field) const {
        const json& value = require(field);
        MSA_CHECK(value.is_array(), "{}: {} must be an array, found {}", source_, name(field), json_kind(value));
        std::vector<int> out;
        for (std::size_t i = 0; i < value.size(); ++i) {
            out.push_back(narrow(to_integer(value[i], fmt::format("{}[{}]", field, i)), field));
        }
        return out;
    }

    std::vector<std::string> string_array(std::string_view field) const {
        const json& value = require(field);
        MSA_CHECK(value.is_array(), "{}: {} must be an array, found {}", source_, name(field), json_kind(value));
        std::vector<std::string> out;
        for (std::size_t i = 0; i < value.size(); ++i) {
            out.push_back(to_string(value[i], fmt::format("{}[{}]", field, i)));
        }
        return out;
    }

    Fields object(std::string_view field) const {
        const json& value = require(field);
        MSA_CHECK(value.is_object(), "{}: {} must be an object, found {}", source_, name(field), json_kind(value));
        return Fields(value, name(field) + ".", source_);
    }

    // Throws "<source>: <path><field> <problem>" (for validation rules).
    template <typename... Args>
    [[noreturn]] void reject(std::string_view field, fmt::format_string<Args...> problem, Args&&... args) const {
        fail("{}: {} {}", source_, name(field), fmt::format(problem, std::forward<Args>(args)...));
    }

private:
    std::int64_t to_integer(const json& value, std::string_view field) const {
        MSA_CHECK(value.is_number_integer(), "{}: {} must be an integer, found {}", source_, name(field),
                  json_kind(value));
        MSA_CHECK(
            !value.is_number_unsigned() ||
                value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
            "{}: {} is too large", source_, name(field));
        return value.get<std::int64_t>();
    }
    int narrow(std::int64_t value, std::string_view field) const {
        MSA_CHECK(value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max(),
                  "{}: {} = {} is out of range", source_, name(field), value);
        return static_cast<int>(value);
    }
    double to_number(const json& value, std::string_view field) const {
        MSA_CHECK(value.is_number(), "{}: {} must be a number, found {}", source_, name(field), json_kind(value));
        return value.get<double>();
    }
    bool to_boolean(const json& value, std::string_view field) const {
        MSA_CHECK(value.is_boolean(), "{}: {} must be true or false, found {}", source_, name(field), json_kind(value));
        return value.get<bool>();
    }
    std::string to_string(const json& value, std::string_view field) const {
        MSA_CHECK(value.is_string(), "{}: {} must be a string, found {}", source_, name(field), json_kind(value));
        return value.get<std::string>();
    }

    const json& object_;
    std::string path_;
    std::string source_;
};

// No model of the family comes near this; a larger value is a corrupt config (and would size per-layer arrays).
constexpr int kMaxLayers = 4096;

void require_positive(const Fields& fields, std::string_view field, std::int64_t value) {
    if (value <= 0) {
        fields.reject(field, "must be positive, found {}", value);
    }
}

// A per-layer 0/1 array of length num_hidden_layers.
void check_layer_array(const Fields& fields, std::string_view field, const std::vector<int>& values, int layers) {
    if (static_cast<int>(values.size()) != layers) {
        fields.reject(field, "has {} entries but num_hidden_layers is {}", values.size(), layers);
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i] != 0 && values[i] != 1) {
            fail("{}: {}[{}] must be 0 or 1, found {}", fields.source(), fields.name(field), i, values[i]);
        }
    }
}

void parse_sparse(const Fields& text, ModelConfig& config) {
    SparseAttentionConfig& sparse = config.sparse;
    if (!text.has("sparse_attention_config")) {
        return;  // dense-only model
    }
    const Fields s = text.object("sparse_attention_config");
    sparse.use_sparse_attention = s.boolean("use_sparse_attention");
    if (s.has("sparse_disable_index_value")) {
        sparse.disable_index_value = s.int_array("sparse_disable_index_value");
        check_layer_array(s, "sparse_disable_index_value", sparse.disable_index_value, config.num_hidden_layers);
    }
    if (!sparse.use_sparse_attention) {
        return;  // every layer dense; the other fields are not needed
    }
    sparse.index_dim = s.int32("sparse_index_dim");
    sparse.num_index_heads = s.int32("sparse_num_index_heads");
    sparse.topk_blocks = s.int32("sparse_topk_blocks");
    sparse.block_size = s.int32("sparse_block_size");
    sparse.score_type = s.string("sparse_score_type");
    sparse.init_block = s.int32_or("sparse_init_block", 0);
    sparse.local_block = s.int32_or("sparse_local_block", 1);
    sparse.attention_freq = s.int_array("sparse_attention_freq");

    check_layer_array(s, "sparse_attention_freq", sparse.attention_freq, config.num_hidden_layers);
    if (sparse.index_dim != config.head_dim) {
        s.reject("sparse_index_dim", "({}) must equal {} ({})", sparse.index_dim, text.name("head_dim"),
                 config.head_dim);
    }
    if (sparse.num_index_heads != config.num_key_value_heads) {
        s.reject("sparse_num_index_heads", "({}) must equal {} ({}): index head g selects blocks for KV group g",
                 sparse.num_index_heads, text.name("num_key_value_heads"), config.num_key_value_heads);
    }
    require_positive(s, "sparse_topk_blocks", sparse.topk_blocks);
    require_positive(s, "sparse_block_size", sparse.block_size);
    if (sparse.block_size % 16 != 0) {
        s.reject("sparse_block_size", "({}) must be a multiple of 16", sparse.block_size);
    }
    if (sparse.score_type != "max") {
        s.reject("sparse_score_type", "is {}; only \"max\" is supported", quote_text(sparse.score_type));
    }
    if (sparse.init_block != 0) {
        s.reject("sparse_init_block", "is {}; only 0 (no attention-sink block) is supported", sparse.init_block);
    }
    if (sparse.local_block != 1) {
        s.reject("sparse_local_block", "is {}; only 1 (the query's own block always selected) is supported",
                 sparse.local_block);
    }
}

void parse_moe(const Fields& text, ModelConfig& config) {
    if (text.has("moe_layer_freq")) {
        config.moe_layer_freq = text.int_array("moe_layer_freq");
        check_layer_array(text, "moe_layer_freq", config.moe_layer_freq, config.num_hidden_layers);
    } else {
        config.moe_layer_freq.assign(config.num_hidden_layers, 0);  // dense-only config
    }
    const int moe_layers = config.num_moe_layers();
    if (moe_layers < config.num_hidden_layers) {
        config.dense_intermediate_size = text.int32("dense_intermediate_size");
        require_positive(text, "dense_intermediate_size", config.dense_intermediate_size);
    } else {
        config.dense_intermediate_size = text.int32_or("dense_intermediate_size", 0);
    }
    if (moe_layers == 0) {
        return;
    }
    config.intermediate_size = text.int32("intermediate_size");
    config.num_local_experts = text.int32("num_local_experts");
    config.num_experts_per_tok = text.int32("num_experts_per_tok");
    config.n_shared_experts = text.int32("n_shared_experts");
    config.scoring_func = text.string("scoring_func");
    config.use_routing_bias = text.boolean("use_routing_bias");
    config.routed_scaling_factor = text.number("routed_scaling_factor");

    require_positive(text, "intermediate_size", config.intermediate_size);
    require_positive(text, "num_local_experts", config.num_local_experts);
    if (config.num_experts_per_tok < 1 || config.num_experts_per_tok > config.num_local_experts) {
        text.reject("num_experts_per_tok", "({}) must be between 1 and num_local_experts ({})",
                    config.num_experts_per_tok, config.num_local_experts);
    }
    if (config.n_shared_experts != 0 && config.n_shared_experts != 1) {
        text.reject("n_shared_experts", "must be 0 or 1, found {}", config.n_shared_experts);
    }
    if (config.n_shared_experts == 1) {
        config.shared_intermediate_size = text.int32("shared_intermediate_size");
        require_positive(text, "shared_intermediate_size", config.shared_intermediate_size);
    }
    if (config.scoring_func != "sigmoid") {
        text.reject("scoring_func", "is {}; only \"sigmoid\" is supported", quote_text(config.scoring_func));
    }
    if (!(config.routed_scaling_factor > 0) || !std::isfinite(config.routed_scaling_factor)) {
        text.reject("routed_scaling_factor", "must be a positive number, found {}", config.routed_scaling_factor);
    }
}

void parse_rope(const Fields& text, ModelConfig& config) {
    config.rope_theta = text.number("rope_theta");
    if (!(config.rope_theta > 1) || !std::isfinite(config.rope_theta)) {
        text.reject("rope_theta", "must be a number above 1, found {}", config.rope_theta);
    }
    if (text.has("rope_scaling")) {
        text.reject("rope_scaling", "is set; RoPE scaling is not part of this model family (model.md section 7)");
    }
    if (text.has("partial_rotary_factor")) {
        config.partial_rotary_factor = text.number("partial_rotary_factor");
        if (!(*config.partial_rotary_factor > 0 && *config.partial_rotary_factor <= 1)) {
            text.reject("partial_rotary_factor", "must be in (0, 1], found {}", *config.partial_rotary_factor);
        }
    }
    if (text.has("rotary_dim")) {
        config.rotary_dim = text.int32("rotary_dim");
    } else if (config.partial_rotary_factor) {
        const double dims = *config.partial_rotary_factor * config.head_dim;
        if (dims != std::floor(dims)) {
            text.reject("partial_rotary_factor", "({}) x head_dim ({}) is not a whole number of dimensions",
                        *config.partial_rotary_factor, config.head_dim);
        }
        config.rotary_dim = static_cast<int>(dims);
    } else {
        fail("{}: {} is missing (and so is {})", text.source(), text.name("rotary_dim"),
             text.name("partial_rotary_factor"));
    }
    if (config.rotary_dim < 2 || config.rotary_dim > config.head_dim || config.rotary_dim % 2 != 0) {
        text.reject("rotary_dim", "({}) must be even and between 2 and head_dim ({})", config.rotary_dim,
                    config.head_dim);
    }
    if (config.partial_rotary_factor &&
        std::abs(*config.partial_rotary_factor * config.head_dim - config.rotary_dim) > 1e-9) {
        text.reject("rotary_dim", "({}) disagrees with partial_rotary_factor ({}) x head_dim ({}) = {}",
                    config.rotary_dim, *config.partial_rotary_factor, config.head_dim,
                    *config.partial_rotary_factor * config.head_dim);
    }
}

QuantizationConfig parse_quantization(const Fields& q) {
    QuantizationConfig quant;
    quant.present = true;
    quant.quant_method = q.string_or("quant_method", "");
    quant.activation_scheme = q.string_or("activation_scheme", "");
    if (q.has("weight_block_size")) {
        quant.weight_block_size = q.int_array("weight_block_size");
    }
    if (q.has("ignored_layers")) {
        quant.ignored_layers = q.string_array("ignored_layers");
    }
    if (q.has("kv_cache_quant_algo")) {
        const std::string algo = q.string("kv_cache_quant_algo");
        if (algo == "NVFP4") {
            quant.kv_cache_quant_algo = KvCacheDtype::NVFP4;
        } else if (algo == "FP8") {
            quant.kv_cache_quant_algo = KvCacheDtype::FP8;
        } else {
            q.reject("kv_cache_quant_algo", "is {}; expected \"NVFP4\" or \"FP8\" (absent means BF16)",
                     quote_text(algo));
        }
    }
    if (q.has("moe_activation_quant")) {
        const std::string scheme = q.string("moe_activation_quant");
        if (scheme != "nvfp4_row_scaled") {
            q.reject("moe_activation_quant", "is {}; the only scheme is \"nvfp4_row_scaled\"", quote_text(scheme));
        }
        quant.moe_activation_nvfp4_row_scaled = true;
    }
    return quant;
}

void parse_text(const Fields& text, ModelConfig& config) {
    config.hidden_size = text.int32("hidden_size");
    config.num_hidden_layers = text.int32("num_hidden_layers");
    config.num_attention_heads = text.int32("num_attention_heads");
    config.num_key_value_heads = text.int32("num_key_value_heads");
    config.head_dim = text.int32("head_dim");
    config.vocab_size = text.int32("vocab_size");
    config.max_position_embeddings = text.integer("max_position_embeddings");
    for (const auto& [field, value] : {std::pair<std::string_view, std::int64_t>{"hidden_size", config.hidden_size},
                                       {"num_hidden_layers", config.num_hidden_layers},
                                       {"num_attention_heads", config.num_attention_heads},
                                       {"num_key_value_heads", config.num_key_value_heads},
                                       {"head_dim", config.head_dim},
                                       {"vocab_size", config.vocab_size},
                                       {"max_position_embeddings", config.max_position_embeddings}}) {
        require_positive(text, field, value);
    }
    if (config.num_attention_heads % config.num_key_value_heads != 0) {
        text.reject("num_attention_heads", "({}) must be a multiple of num_key_value_heads ({})",
                    config.num_attention_heads, config.num_key_value_heads);
    }
    if (config.head_dim % 16 != 0) {
        text.reject("head_dim", "({}) must be a multiple of 16 (KV-cache blocks hold 16 values)", config.head_dim);
    }
    if (config.num_hidden_layers > kMaxLayers) {
        text.reject("num_hidden_layers", "({}) is implausibly large (limit {})", config.num_hidden_layers, kMaxLayers);
    }

    config.rms_norm_eps = text.number("rms_norm_eps");
    if (!(config.rms_norm_eps > 0) || !std::isfinite(config.rms_norm_eps)) {
        text.reject("rms_norm_eps", "must be a positive number, found {}", config.rms_norm_eps);
    }
    config.use_gemma_norm = text.boolean("use_gemma_norm");
    if (!config.use_gemma_norm) {
        text.reject("use_gemma_norm",
                    "is false; only the Gemma RMSNorm x * rsqrt(mean(x^2) + eps) * (1 + w) is "
                    "defined for this model family");
    }
    config.use_qk_norm = text.boolean("use_qk_norm");
    if (config.use_qk_norm) {
        config.qk_norm_type = text.string("qk_norm_type");
        if (config.qk_norm_type != "per_head") {
            text.reject("qk_norm_type", "is {}; only \"per_head\" is supported", quote_text(config.qk_norm_type));
        }
    } else {
        config.qk_norm_type = text.string_or("qk_norm_type", "");
    }
    parse_rope(text, config);
    config.attention_output_gate = text.boolean_or("attention_output_gate", false);
    if (config.attention_output_gate) {
        text.reject("attention_output_gate", "is true; gated attention output is not part of this model family");
    }
    config.tie_word_embeddings = text.boolean_or("tie_word_embeddings", false);

    config.hidden_act = text.string("hidden_act");
    if (config.hidden_act != "swigluoai") {
        text.reject("hidden_act", "is {}; only \"swigluoai\" is supported", quote_text(config.hidden_act));
    }
    config.swiglu_alpha = text.number_or("swiglu_alpha", 1.702);
    config.swiglu_limit = text.number_or("swiglu_limit", 7.0);
    if (!(config.swiglu_limit > 0)) {
        text.reject("swiglu_limit", "must be positive, found {}", config.swiglu_limit);
    }
    parse_moe(text, config);
    parse_sparse(text, config);
    config.num_mtp_modules = text.int32_or("num_mtp_modules", 0);

    config.dtype = text.string_or("dtype", text.string_or("torch_dtype", ""));
    if (text.has("architectures")) {
        config.architectures = text.string_array("architectures");
    }
}

}  // namespace

ModelConfig model_config_from_json(const nlohmann::json& document, std::string_view source) {
    MSA_CHECK(document.is_object(), "{}: the config must be a JSON object, found {}", source, json_kind(document));
    const Fields top(document, "", source);
    ModelConfig config;
    config.model_type = top.string_or("model_type", "");
    if (top.has("architectures")) {
        config.architectures = top.string_array("architectures");
    }
    const bool wrapped = top.has("text_config");
    config.text_prefix = wrapped ? "text_config." : "";
    const Fields text = wrapped ? top.object("text_config") : top;
    parse_text(text, config);

    if (top.has("image_token_index")) {
        config.image_token_index = top.integer("image_token_index");
    }
    if (top.has("video_token_index")) {
        config.video_token_index = top.integer("video_token_index");
    }
    // quantization_config sits at the top level of the real config; a text-only config may nest it either way.
    if (top.has("quantization_config")) {
        config.quantization = parse_quantization(top.object("quantization_config"));
    } else if (wrapped && text.has("quantization_config")) {
        config.quantization = parse_quantization(text.object("quantization_config"));
    }
    return config;
}

ModelConfig parse_model_config(std::string_view json_text, std::string_view source) {
    json document;
    try {
        document = json::parse(json_text.begin(), json_text.end());
    } catch (const json::exception& e) {
        fail("{}: not valid JSON: {}", source, printable(e.what()));
    }
    return model_config_from_json(document, source);
}

ModelConfig load_model_config(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path file = fs::is_directory(path, ec) ? fs::path(path) / "config.json" : fs::path(path);
    MSA_CHECK(fs::is_regular_file(file, ec), "{}: no such file", file.string());
    std::ifstream in(file, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open {}", file.string());
    std::ostringstream text;
    text << in.rdbuf();
    MSA_CHECK(!in.bad(), "cannot read {}", file.string());
    return parse_model_config(text.str(), file.string());
}

// ---- derived helpers ----------------------------------------------------------------------------------------

bool ModelConfig::is_msa_layer(int layer) const {
    MSA_CHECK(layer >= 0 && layer < num_hidden_layers, "layer {} out of range [0, {})", layer, num_hidden_layers);
    return sparse.use_sparse_attention && sparse.attention_freq[static_cast<std::size_t>(layer)] == 1;
}

bool ModelConfig::is_moe_layer(int layer) const {
    MSA_CHECK(layer >= 0 && layer < num_hidden_layers, "layer {} out of range [0, {})", layer, num_hidden_layers);
    return moe_layer_freq[static_cast<std::size_t>(layer)] == 1;
}

int ModelConfig::num_msa_layers() const {
    int count = 0;
    for (int i = 0; i < num_hidden_layers; ++i) {
        count += is_msa_layer(i) ? 1 : 0;
    }
    return count;
}

int ModelConfig::num_moe_layers() const {
    int count = 0;
    for (int value : moe_layer_freq) {
        count += value == 1 ? 1 : 0;
    }
    return count;
}

std::int64_t ModelConfig::index_q_dim() const {
    return sparse.use_sparse_attention ? std::int64_t{sparse.num_index_heads} * sparse.index_dim : 0;
}

KvCacheDtype ModelConfig::default_kv_cache_dtype() const {
    return quantization.kv_cache_quant_algo.value_or(KvCacheDtype::BF16);
}

std::uint64_t ModelConfig::kv_bytes_per_token(KvCacheDtype dtype) const {
    // K and V: num_key_value_heads vectors of head_dim each, in every layer.
    return 2ull * static_cast<std::uint64_t>(num_hidden_layers) * static_cast<std::uint64_t>(num_key_value_heads) *
           kv_cache_vector_bytes(dtype, static_cast<std::size_t>(head_dim));
}

std::uint64_t ModelConfig::index_k_bytes_per_token(KvCacheDtype dtype) const {
    // One shared index-key head of index_dim per MSA layer.
    if (!sparse.use_sparse_attention) {
        return 0;
    }
    return static_cast<std::uint64_t>(num_msa_layers()) *
           kv_cache_vector_bytes(dtype, static_cast<std::size_t>(sparse.index_dim));
}

}  // namespace msa
