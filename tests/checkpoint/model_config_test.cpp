// config.json -> ModelConfig: the real MiniMax-M3 config (values checked against model.md's table), generated flat
// configs, documented defaults of optional fields, and every validation error naming the offending field.
#include "model/model_config.h"
#include "test_checkpoint.h"
#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace msa {
namespace {

using nlohmann::json;
using test::error_of;
using ::testing::HasSubstr;

const std::string kM3ConfigPath = std::string(MSA_SOURCE_DIR) + "/examples/minimax-m3/config.json";

json m3_config() {
    return json::parse(test::read_file(kM3ConfigPath));
}

// Follows a dotted path ("text_config.sparse_attention_config.sparse_index_dim") to the parent object.
json& parent_of(json& doc, const std::string& path, std::string& leaf) {
    json* node = &doc;
    std::size_t start = 0;
    for (std::size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
        node = &(*node)[path.substr(start, dot - start)];
    }
    leaf = path.substr(start);
    return *node;
}

json with(json doc, const std::string& path, const json& value) {
    std::string leaf;
    parent_of(doc, path, leaf)[leaf] = value;
    return doc;
}

json without(json doc, const std::string& path) {
    std::string leaf;
    parent_of(doc, path, leaf).erase(leaf);
    return doc;
}

ModelConfig parse(const json& doc) {
    return parse_model_config(doc.dump(), "config.json");
}

std::string parse_error(const json& doc) {
    const std::string message = error_of([&] { (void)parse(doc); });
    EXPECT_THAT(message, HasSubstr("config.json")) << "the error must name the file";
    return message;
}

// A small flat (text-only) config of the family (test_checkpoint.h: 4 layers, dense layer 0, MoE 1-3, MSA 2-3),
// with rotary_dim alone and our own quantization_config fields.
json tiny_flat_config() {
    json c = test::small_config();
    c.erase("partial_rotary_factor");
    c["quantization_config"] = {{"kv_cache_quant_algo", "NVFP4"}, {"moe_activation_quant", "nvfp4_row_scaled"}};
    return c;
}

// ---- the real config ----------------------------------------------------------------------------------------

TEST(ModelConfig, ParsesTheRealMiniMaxM3Config) {
    const ModelConfig c = load_model_config(kM3ConfigPath);
    // model.md section 1.
    EXPECT_EQ(c.text_prefix, "text_config.");
    EXPECT_EQ(c.model_type, "minimax_m3_vl");
    EXPECT_EQ(c.architectures, std::vector<std::string>{"MiniMaxM3SparseForCausalLM"});
    EXPECT_EQ(c.dtype, "bfloat16");
    EXPECT_EQ(c.hidden_size, 6144);
    EXPECT_EQ(c.num_hidden_layers, 60);
    EXPECT_EQ(c.num_attention_heads, 64);
    EXPECT_EQ(c.num_key_value_heads, 4);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.gqa_ratio(), 16);
    EXPECT_EQ(c.vocab_size, 200064);
    EXPECT_EQ(c.max_position_embeddings, 1048576);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_TRUE(c.use_gemma_norm);
    EXPECT_TRUE(c.use_qk_norm);
    EXPECT_EQ(c.qk_norm_type, "per_head");
    EXPECT_DOUBLE_EQ(c.rope_theta, 5'000'000);
    EXPECT_EQ(c.rotary_dim, 64);
    EXPECT_DOUBLE_EQ(c.partial_rotary_factor.value(), 0.5);
    EXPECT_FALSE(c.attention_output_gate);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.hidden_act, "swigluoai");
    EXPECT_DOUBLE_EQ(c.swiglu_alpha, 1.702);
    EXPECT_DOUBLE_EQ(c.swiglu_limit, 7.0);
    EXPECT_EQ(c.dense_intermediate_size, 12288);
    EXPECT_EQ(c.intermediate_size, 3072);
    EXPECT_EQ(c.num_local_experts, 128);
    EXPECT_EQ(c.num_experts_per_tok, 4);
    EXPECT_EQ(c.n_shared_experts, 1);
    EXPECT_EQ(c.shared_intermediate_size, 3072);
    EXPECT_EQ(c.scoring_func, "sigmoid");
    EXPECT_TRUE(c.use_routing_bias);
    EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.0);
    EXPECT_EQ(c.num_mtp_modules, 1);
    EXPECT_EQ(c.image_token_index, 200025);
    EXPECT_EQ(c.video_token_index, 200026);
    // Layers 0-2 dense attention + dense MLP; 3-59 MSA + MoE.
    for (int l = 0; l < 60; ++l) {
        EXPECT_EQ(c.is_moe_layer(l), l >= 3) << l;
        EXPECT_EQ(c.is_msa_layer(l), l >= 3) << l;
    }
    EXPECT_EQ(c.num_moe_layers(), 57);
    EXPECT_EQ(c.num_msa_layers(), 57);
    EXPECT_THROW((void)c.is_msa_layer(60), Error);
    EXPECT_THROW((void)c.is_moe_layer(-1), Error);
    // sparse_attention_config (msa.md).
    EXPECT_TRUE(c.sparse.use_sparse_attention);
    EXPECT_EQ(c.sparse.index_dim, 128);
    EXPECT_EQ(c.sparse.num_index_heads, 4);
    EXPECT_EQ(c.sparse.topk_blocks, 16);
    EXPECT_EQ(c.sparse.block_size, 128);
    EXPECT_EQ(c.sparse.score_type, "max");
    EXPECT_EQ(c.sparse.init_block, 0);
    EXPECT_EQ(c.sparse.local_block, 1);
    EXPECT_EQ(c.sparse.disable_index_value.size(), 60u);
    EXPECT_EQ(c.index_q_dim(), 512);
    // quantization_config (top level of the wrapper).
    EXPECT_TRUE(c.quantization.present);
    EXPECT_EQ(c.quantization.quant_method, "mxfp8");
    EXPECT_EQ(c.quantization.activation_scheme, "dynamic");
    EXPECT_EQ(c.quantization.weight_block_size, (std::vector<int>{1, 32}));
    EXPECT_EQ(c.quantization.ignored_layers.size(), 6u);
    EXPECT_FALSE(c.quantization.kv_cache_quant_algo.has_value());
    EXPECT_FALSE(c.quantization.moe_activation_nvfp4_row_scaled);
    EXPECT_EQ(c.default_kv_cache_dtype(), KvCacheDtype::BF16);
    // The whole directory works too.
    EXPECT_EQ(load_model_config(std::string(MSA_SOURCE_DIR) + "/examples/minimax-m3").hidden_size, 6144);
}

// model.md section 5: K+V 34,560 B/token in NVFP4 and 61,440 B in FP8, index keys 4,320 B (all 60 layers MSA).
TEST(ModelConfig, KvBytesPerTokenMatchModelMdForM31AllSparse) {
    const ModelConfig m3 = parse(m3_config());
    EXPECT_EQ(m3.kv_bytes_per_token(KvCacheDtype::NVFP4), 34'560u);
    EXPECT_EQ(m3.kv_bytes_per_token(KvCacheDtype::FP8), 61'440u);
    EXPECT_EQ(m3.kv_bytes_per_token(KvCacheDtype::BF16), 122'880u);
    // M3: index keys only in the 57 MSA layers (72 B each in NVFP4: 64 data + 8 scales).
    EXPECT_EQ(m3.index_k_bytes_per_token(KvCacheDtype::NVFP4), 57u * 72u);

    const ModelConfig m31 =
        parse(with(m3_config(), "text_config.sparse_attention_config.sparse_attention_freq", std::vector<int>(60, 1)));
    EXPECT_EQ(m31.num_msa_layers(), 60);
    EXPECT_EQ(m31.kv_bytes_per_token(KvCacheDtype::NVFP4), 34'560u);
    EXPECT_EQ(m31.kv_bytes_per_token(KvCacheDtype::FP8), 61'440u);
    EXPECT_EQ(m31.index_k_bytes_per_token(KvCacheDtype::NVFP4), 4'320u);
    EXPECT_EQ(m31.index_k_bytes_per_token(KvCacheDtype::FP8), 7'680u);
}

// ---- generated flat configs ---------------------------------------------------------------------------------

TEST(ModelConfig, ParsesFlatTextOnlyConfig) {
    const ModelConfig c = parse(tiny_flat_config());
    EXPECT_EQ(c.text_prefix, "");
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.rotary_dim, 16);
    EXPECT_FALSE(c.partial_rotary_factor.has_value());
    EXPECT_EQ(c.num_moe_layers(), 3);
    EXPECT_FALSE(c.is_moe_layer(0));
    EXPECT_EQ(c.num_msa_layers(), 2);
    EXPECT_FALSE(c.is_msa_layer(1));
    EXPECT_TRUE(c.is_msa_layer(2));
    EXPECT_EQ(c.default_kv_cache_dtype(), KvCacheDtype::NVFP4);
    EXPECT_TRUE(c.quantization.moe_activation_nvfp4_row_scaled);
    EXPECT_TRUE(c.sparse.disable_index_value.empty());
    // K+V: 4 layers x 2 x 2 heads x (16 + 2) bytes; index: 2 MSA layers x 18 bytes.
    EXPECT_EQ(c.kv_bytes_per_token(KvCacheDtype::NVFP4), 4u * 2 * 2 * 18);
    EXPECT_EQ(c.index_k_bytes_per_token(KvCacheDtype::NVFP4), 2u * 18);
    EXPECT_EQ(c.kv_bytes_per_token(KvCacheDtype::BF16), 4u * 2 * 2 * 64);
}

TEST(ModelConfig, OptionalFieldsTakeTheirDocumentedDefaults) {
    json doc = tiny_flat_config();
    for (const char* field : {"swiglu_alpha", "swiglu_limit", "attention_output_gate", "tie_word_embeddings",
                              "num_mtp_modules", "quantization_config", "architectures"}) {
        doc.erase(field);
    }
    doc["sparse_attention_config"].erase("sparse_init_block");
    doc["sparse_attention_config"].erase("sparse_local_block");
    const ModelConfig c = parse(doc);
    EXPECT_DOUBLE_EQ(c.swiglu_alpha, 1.702);
    EXPECT_DOUBLE_EQ(c.swiglu_limit, 7.0);
    EXPECT_FALSE(c.attention_output_gate);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.num_mtp_modules, 0);
    EXPECT_FALSE(c.quantization.present);
    EXPECT_EQ(c.default_kv_cache_dtype(), KvCacheDtype::BF16);
    EXPECT_EQ(c.sparse.init_block, 0);
    EXPECT_EQ(c.sparse.local_block, 1);
    // JSON null counts as absent for optional fields.
    EXPECT_FALSE(parse(with(tiny_flat_config(), "rope_scaling", nullptr)).attention_output_gate);
}

TEST(ModelConfig, DenseOnlyConfigNeedsNoMoeOrSparseFields) {
    json doc = tiny_flat_config();
    for (const char* field :
         {"moe_layer_freq", "intermediate_size", "shared_intermediate_size", "num_local_experts", "num_experts_per_tok",
          "n_shared_experts", "scoring_func", "use_routing_bias", "routed_scaling_factor", "sparse_attention_config"}) {
        doc.erase(field);
    }
    const ModelConfig c = parse(doc);
    EXPECT_EQ(c.num_moe_layers(), 0);
    EXPECT_EQ(c.num_msa_layers(), 0);
    EXPECT_EQ(c.index_k_bytes_per_token(KvCacheDtype::NVFP4), 0u);
    // All-MoE configs need no dense_intermediate_size.
    json all_moe = with(tiny_flat_config(), "moe_layer_freq", {1, 1, 1, 1});
    all_moe.erase("dense_intermediate_size");
    EXPECT_EQ(parse(all_moe).num_moe_layers(), 4);
    // No shared expert: no shared_intermediate_size needed.
    json no_shared = with(tiny_flat_config(), "n_shared_experts", 0);
    no_shared.erase("shared_intermediate_size");
    EXPECT_EQ(parse(no_shared).n_shared_experts, 0);
}

TEST(ModelConfig, UseSparseAttentionFalseMakesEveryLayerDense) {
    const json doc = with(tiny_flat_config(), "sparse_attention_config", {{"use_sparse_attention", false}});
    const ModelConfig c = parse(doc);
    EXPECT_EQ(c.num_msa_layers(), 0);
    EXPECT_EQ(c.index_q_dim(), 0);
}

TEST(ModelConfig, RotaryDimFromPartialRotaryFactorAndAgreement) {
    json doc = without(tiny_flat_config(), "rotary_dim");
    doc["partial_rotary_factor"] = 0.25;
    EXPECT_EQ(parse(doc).rotary_dim, 8);
    doc["rotary_dim"] = 8;
    EXPECT_EQ(parse(doc).rotary_dim, 8);
    doc["rotary_dim"] = 16;
    EXPECT_THAT(parse_error(doc),
                ::testing::AllOf(HasSubstr("rotary_dim (16) disagrees"), HasSubstr("partial_rotary_factor")));
}

TEST(ModelConfig, QuantizationConfigInsideTextConfigIsAccepted) {
    json doc = without(m3_config(), "quantization_config");
    doc["text_config"]["quantization_config"] = {{"kv_cache_quant_algo", "FP8"}};
    EXPECT_EQ(parse(doc).default_kv_cache_dtype(), KvCacheDtype::FP8);
}

// ---- errors name the field ----------------------------------------------------------------------------------

TEST(ModelConfigErrors, EveryRequiredFieldMissingIsNamed) {
    const std::vector<std::string> required = {
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "rms_norm_eps",
        "use_gemma_norm",
        "use_qk_norm",
        "qk_norm_type",
        "rope_theta",
        "hidden_act",
        "dense_intermediate_size",
        "intermediate_size",
        "num_local_experts",
        "num_experts_per_tok",
        "n_shared_experts",
        "shared_intermediate_size",
        "scoring_func",
        "use_routing_bias",
        "routed_scaling_factor",
        "sparse_attention_config.use_sparse_attention",
        "sparse_attention_config.sparse_index_dim",
        "sparse_attention_config.sparse_num_index_heads",
        "sparse_attention_config.sparse_topk_blocks",
        "sparse_attention_config.sparse_block_size",
        "sparse_attention_config.sparse_score_type",
        "sparse_attention_config.sparse_attention_freq",
    };
    for (const auto& field : required) {
        // In the VL wrapper (real config) the path carries text_config.; in a flat config it does not.
        EXPECT_THAT(parse_error(without(m3_config(), "text_config." + field)),
                    HasSubstr("text_config." + field + " is missing"));
        EXPECT_THAT(parse_error(without(tiny_flat_config(), field)), HasSubstr(": " + field + " is missing"));
        // JSON null is as good as missing for a required field.
        EXPECT_THAT(parse_error(with(tiny_flat_config(), field, nullptr)), HasSubstr(field + " is missing"));
    }
    // Neither rotary_dim nor partial_rotary_factor.
    json doc = without(without(m3_config(), "text_config.rotary_dim"), "text_config.partial_rotary_factor");
    EXPECT_THAT(parse_error(doc), HasSubstr("text_config.rotary_dim is missing"));
}

TEST(ModelConfigErrors, WrongTypesAreNamed) {
    struct Case {
        std::string field;
        json value;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {"hidden_size", "6144", "text_config.hidden_size must be an integer, found a string"},
        {"head_dim", 128.5, "text_config.head_dim must be an integer, found a fractional number"},
        {"use_gemma_norm", 1, "text_config.use_gemma_norm must be true or false"},
        {"rope_theta", "big", "text_config.rope_theta must be a number, found a string"},
        {"hidden_act", 5, "text_config.hidden_act must be a string"},
        {"moe_layer_freq", 1, "text_config.moe_layer_freq must be an array, found an integer"},
        {"sparse_attention_config", json::array(), "text_config.sparse_attention_config must be an object"},
        {"sparse_attention_config.sparse_attention_freq",
         {0, "1"},
         "text_config.sparse_attention_config.sparse_attention_freq[1] must be an integer"},
        {"num_hidden_layers", 1ull << 40, "text_config.num_hidden_layers = 1099511627776 is out of range"},
    };
    for (const auto& c : cases) {
        EXPECT_THAT(parse_error(with(m3_config(), "text_config." + c.field, c.value)), HasSubstr(c.expected))
            << c.field;
    }
    EXPECT_THAT(parse_error(with(m3_config(), "text_config", 3)), HasSubstr("text_config must be an object"));
    EXPECT_THAT(parse_error(with(m3_config(), "quantization_config.kv_cache_quant_algo", 4)),
                HasSubstr("quantization_config.kv_cache_quant_algo must be a string"));
}

TEST(ModelConfigErrors, ValidationRulesNameTheField) {
    const std::vector<int> ones_59(59, 1);
    struct Case {
        std::string field;
        json value;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {"hidden_size", 0, "text_config.hidden_size must be positive"},
        {"num_key_value_heads", -4, "text_config.num_key_value_heads must be positive"},
        {"head_dim", 120, "text_config.head_dim (120) must be a multiple of 16"},
        {"num_hidden_layers", 100000, "text_config.num_hidden_layers (100000) is implausibly large"},
        {"num_attention_heads", 62, "text_config.num_attention_heads (62) must be a multiple of num_key_value_heads"},
        {"rms_norm_eps", 0, "text_config.rms_norm_eps must be a positive number"},
        {"use_gemma_norm", false, "text_config.use_gemma_norm is false"},
        {"qk_norm_type", "per_layer", "text_config.qk_norm_type is \"per_layer\""},
        {"rope_theta", 0.5, "text_config.rope_theta must be a number above 1"},
        {"rope_scaling", {{"type", "yarn"}}, "text_config.rope_scaling is set"},
        {"rotary_dim", 32, "text_config.rotary_dim (32) disagrees with partial_rotary_factor (0.5)"},
        {"partial_rotary_factor", 1.5, "text_config.partial_rotary_factor must be in (0, 1]"},
        {"attention_output_gate", true, "text_config.attention_output_gate is true"},
        {"hidden_act", "silu", "text_config.hidden_act is \"silu\"; only \"swigluoai\""},
        {"moe_layer_freq", ones_59, "text_config.moe_layer_freq has 59 entries but num_hidden_layers is 60"},
        {"moe_layer_freq", std::vector<int>(60, 2), "text_config.moe_layer_freq[0] must be 0 or 1, found 2"},
        {"num_experts_per_tok", 0, "text_config.num_experts_per_tok (0) must be between 1 and num_local_experts"},
        {"num_experts_per_tok", 129, "text_config.num_experts_per_tok (129) must be between 1"},
        {"n_shared_experts", 2, "text_config.n_shared_experts must be 0 or 1, found 2"},
        {"scoring_func", "softmax", "text_config.scoring_func is \"softmax\""},
        {"routed_scaling_factor", -1, "text_config.routed_scaling_factor must be a positive number"},
        {"dense_intermediate_size", 0, "text_config.dense_intermediate_size must be positive"},
        {"sparse_attention_config.sparse_index_dim", 64,
         "text_config.sparse_attention_config.sparse_index_dim (64) must equal text_config.head_dim (128)"},
        {"sparse_attention_config.sparse_num_index_heads", 8,
         "text_config.sparse_attention_config.sparse_num_index_heads (8) must equal text_config.num_key_value_heads"},
        {"sparse_attention_config.sparse_init_block", 1, "text_config.sparse_attention_config.sparse_init_block is 1"},
        {"sparse_attention_config.sparse_local_block", 0,
         "text_config.sparse_attention_config.sparse_local_block is 0"},
        {"sparse_attention_config.sparse_score_type", "mean", "sparse_score_type is \"mean\"; only \"max\""},
        {"sparse_attention_config.sparse_topk_blocks", 0, "sparse_topk_blocks must be positive"},
        {"sparse_attention_config.sparse_block_size", 100, "sparse_block_size (100) must be a multiple of 16"},
        {"sparse_attention_config.sparse_attention_freq", ones_59,
         "text_config.sparse_attention_config.sparse_attention_freq has 59 entries"},
        {"sparse_attention_config.sparse_disable_index_value", ones_59,
         "text_config.sparse_attention_config.sparse_disable_index_value has 59 entries"},
    };
    for (const auto& c : cases) {
        EXPECT_THAT(parse_error(with(m3_config(), "text_config." + c.field, c.value)), HasSubstr(c.expected))
            << c.field;
    }
    EXPECT_THAT(parse_error(with(m3_config(), "quantization_config.kv_cache_quant_algo", "INT8")),
                HasSubstr("quantization_config.kv_cache_quant_algo is \"INT8\""));
    EXPECT_THAT(parse_error(with(m3_config(), "quantization_config.moe_activation_quant", "fp8")),
                HasSubstr("quantization_config.moe_activation_quant is \"fp8\""));
    EXPECT_THAT(parse_error(with(m3_config(), "quantization_config", "mxfp8")),
                HasSubstr("quantization_config must be an object"));
}

TEST(ModelConfigErrors, BadJsonAndMissingFiles) {
    EXPECT_THAT(error_of([] { (void)parse_model_config("{\"hidden_size\": ", "config.json"); }),
                HasSubstr("config.json: not valid JSON"));
    EXPECT_THAT(error_of([] { (void)parse_model_config("[1]", "config.json"); }),
                HasSubstr("must be a JSON object, found an array"));
    test::TempDir dir;
    EXPECT_THAT(error_of([&] { (void)load_model_config(dir.path().string()); }),
                HasSubstr("config.json: no such file"));
    test::write_file(dir.file("config.json"), "\x01\x02garbage\n\n");
    const std::string message = error_of([&] { (void)load_model_config(dir.path().string()); });
    EXPECT_THAT(message, HasSubstr(dir.file("config.json")));
}

// The fuzz seed corpus (tools/fuzz/make_model_config_corpus.py): valid_* files parse, bad_* files are rejected.
TEST(ModelConfigCorpus, ValidFilesParseAndBrokenFilesAreRejected) {
    const std::filesystem::path corpus = std::filesystem::path(MSA_SOURCE_DIR) / "fuzz/corpus/fuzz_model_config";
    int valid = 0;
    int bad = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with("valid_")) {
            EXPECT_NO_THROW((void)load_model_config(entry.path().string())) << name;
            ++valid;
        } else if (name.starts_with("bad_")) {
            EXPECT_THAT(error_of([&] { (void)load_model_config(entry.path().string()); }), HasSubstr(name));
            ++bad;
        }
    }
    EXPECT_GE(valid, 4);
    EXPECT_GE(bad, 8);
}

}  // namespace
}  // namespace msa
