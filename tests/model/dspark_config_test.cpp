// parse_dspark_config: the drafter config.json that tools/train/export.py writes (the shipped one), and a clear error
// naming the field for every malformed or unsupported value.
#include "core/error.h"
#include "model/dspark_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace msa {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json shipped_config() {
    std::ifstream in(std::filesystem::path(MSA_SOURCE_DIR) / "models" / "default" / "drafter" / "config.json");
    std::stringstream text;
    text << in.rdbuf();
    return json::parse(text.str());
}

std::string error_of(const json& doc) {
    try {
        parse_dspark_config(doc.dump(), "drafter/config.json");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(DSparkConfig, ParsesTheShippedConfig) {
    const json doc = shipped_config();
    const DSparkConfig c = parse_dspark_config(doc.dump(), "config.json");
    EXPECT_EQ(c.hidden_size, doc["hidden_size"].get<int>());
    EXPECT_EQ(c.num_hidden_layers, doc["num_hidden_layers"].get<int>());
    EXPECT_EQ(c.num_attention_heads, doc["num_attention_heads"].get<int>());
    EXPECT_EQ(c.num_key_value_heads, doc["num_key_value_heads"].get<int>());
    EXPECT_EQ(c.head_dim, doc["head_dim"].get<int>());
    EXPECT_EQ(c.rotary_dim, doc["rotary_dim"].get<int>());
    EXPECT_DOUBLE_EQ(c.rope_theta, doc["rope_theta"].get<double>());
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, doc["rms_norm_eps"].get<double>());
    EXPECT_EQ(c.intermediate_size, doc["intermediate_size"].get<int>());
    EXPECT_EQ(c.vocab_size, doc["vocab_size"].get<int>());
    EXPECT_EQ(c.target_layer_ids, doc["target_layer_ids"].get<std::vector<int>>());
    EXPECT_EQ(c.block_size, doc["dspark_block_size"].get<int>());
    EXPECT_EQ(c.mask_token_id, doc["mask_token_id"].get<int>());
    EXPECT_EQ(c.sliding_window, doc["sliding_window"].get<int>());
    EXPECT_EQ(c.markov_rank, doc["markov_head"]["rank"].get<int>());
    EXPECT_EQ(c.target_model, "..");
    EXPECT_EQ(c.tap_width(), static_cast<std::int64_t>(c.target_layer_ids.size()) * c.hidden_size);
}

TEST(DSparkConfig, MalformedOrUnsupportedFieldsAreNamed) {
    const json good = shipped_config();
    auto with = [&](const char* field, json value) {
        json d = good;
        d[field] = std::move(value);
        return error_of(d);
    };
    auto without = [&](const char* field) {
        json d = good;
        d.erase(field);
        return error_of(d);
    };
    EXPECT_THAT(without("hidden_size"), HasSubstr("hidden_size is missing"));
    EXPECT_THAT(without("markov_head"), HasSubstr("markov_head is missing"));
    EXPECT_THAT(with("num_hidden_layers", "2"), HasSubstr("num_hidden_layers must be an integer"));
    EXPECT_THAT(with("num_hidden_layers", 0), HasSubstr("num_hidden_layers = 0 must be at least 1"));
    EXPECT_THAT(with("num_key_value_heads", 3), HasSubstr("not a multiple of num_key_value_heads"));
    EXPECT_THAT(with("rotary_dim", 63), HasSubstr("rotary_dim"));
    EXPECT_THAT(with("rope_theta", -1.0), HasSubstr("rope_theta"));
    EXPECT_THAT(with("mask_token_id", 5000), HasSubstr("mask_token_id 5000 is outside the vocabulary"));
    EXPECT_THAT(with("target_layer_ids", json::array()), HasSubstr("target_layer_ids must be a non-empty array"));
    EXPECT_THAT(with("target_layer_ids", json::array({1, 1})), HasSubstr("lists layer 1 twice"));
    EXPECT_THAT(with("target_layer_ids", json::array({-1})), HasSubstr("not a layer index"));
    EXPECT_THAT(with("causal", true), HasSubstr("causal"));
    EXPECT_THAT(with("hidden_act", "gelu"), HasSubstr("hidden_act"));
    EXPECT_THAT(with("swiglu_limit", 10.0), HasSubstr("swiglu_limit"));
    EXPECT_THAT(with("use_gemma_norm", false), HasSubstr("use_gemma_norm"));
    EXPECT_THAT(with("qk_norm_type", "per_layer"), HasSubstr("qk_norm_type"));
    EXPECT_THAT(with("shares_target_lm_head", false), HasSubstr("shares_target_lm_head"));
    EXPECT_THAT(with("model_type", "minimax"), HasSubstr("model_type"));
    EXPECT_THAT(with("markov_head", json{{"type", "gated"}, {"rank", 8}}), HasSubstr("vanilla"));
    EXPECT_THAT(with("target_model", ""), HasSubstr("target_model"));
    EXPECT_THAT(error_of(json::array()), HasSubstr("must be a JSON object"));
    EXPECT_THAT(
        [] {
            try {
                parse_dspark_config("{\"hidden_size\": ", "x.json");
            } catch (const Error& e) {
                return std::string(e.what());
            }
            return std::string();
        }(),
        HasSubstr("x.json: not valid JSON"));
    EXPECT_EQ(error_of(good), "");
}

}  // namespace
}  // namespace msa
