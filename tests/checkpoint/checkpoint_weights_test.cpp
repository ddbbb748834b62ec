// Tensor names (both prefixes), vision-tensor recognition, per-tensor format detection and shape validation when
// binding a checkpoint, and the figures of model_summary (weights counted from headers vs estimated from the
// config, KV bytes per rank, capacity).
#include "model/checkpoint_weights.h"
#include "model/model_summary.h"
#include "model/weight_names.h"
#include "test_checkpoint.h"
#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace msa {
namespace {

using test::error_of;
using test::GeneratorOptions;
using test::StoredFormat;
using test::TempDir;
using ::testing::HasSubstr;

// ---- names --------------------------------------------------------------------------------------------------

TEST(WeightNames, VisionLanguagePrefixMatchesModelMd) {
    const WeightNames n(WeightPrefixStyle::vision_language);
    EXPECT_EQ(n.model_prefix(), "language_model.model.");
    EXPECT_EQ(n.embed_tokens(), "language_model.model.embed_tokens.weight");
    EXPECT_EQ(n.final_norm(), "language_model.model.norm.weight");
    EXPECT_EQ(n.lm_head(), "language_model.lm_head.weight");
    EXPECT_EQ(n.input_layernorm(3), "language_model.model.layers.3.input_layernorm.weight");
    EXPECT_EQ(n.post_attention_layernorm(3), "language_model.model.layers.3.post_attention_layernorm.weight");
    EXPECT_EQ(n.q_proj(3), "language_model.model.layers.3.self_attn.q_proj");
    EXPECT_EQ(n.k_proj(3), "language_model.model.layers.3.self_attn.k_proj");
    EXPECT_EQ(n.v_proj(3), "language_model.model.layers.3.self_attn.v_proj");
    EXPECT_EQ(n.o_proj(3), "language_model.model.layers.3.self_attn.o_proj");
    EXPECT_EQ(n.q_norm(3), "language_model.model.layers.3.self_attn.q_norm.weight");
    EXPECT_EQ(n.k_norm(3), "language_model.model.layers.3.self_attn.k_norm.weight");
    EXPECT_EQ(n.index_q_proj(59), "language_model.model.layers.59.self_attn.index_q_proj");
    EXPECT_EQ(n.index_k_proj(59), "language_model.model.layers.59.self_attn.index_k_proj");
    EXPECT_EQ(n.index_q_norm(59), "language_model.model.layers.59.self_attn.index_q_norm.weight");
    EXPECT_EQ(n.index_k_norm(59), "language_model.model.layers.59.self_attn.index_k_norm.weight");
    EXPECT_EQ(n.mlp_gate_proj(0), "language_model.model.layers.0.mlp.gate_proj");
    EXPECT_EQ(n.mlp_up_proj(0), "language_model.model.layers.0.mlp.up_proj");
    EXPECT_EQ(n.mlp_down_proj(0), "language_model.model.layers.0.mlp.down_proj");
    EXPECT_EQ(n.router_gate(7), "language_model.model.layers.7.block_sparse_moe.gate.weight");
    EXPECT_EQ(n.router_bias(7), "language_model.model.layers.7.block_sparse_moe.e_score_correction_bias");
    EXPECT_EQ(n.router_bias_in_gate(7), "language_model.model.layers.7.block_sparse_moe.gate.e_score_correction_bias");
    EXPECT_EQ(n.expert(7, 127, ExpertProj::w1), "language_model.model.layers.7.block_sparse_moe.experts.127.w1");
    EXPECT_EQ(n.expert(7, 0, ExpertProj::w2), "language_model.model.layers.7.block_sparse_moe.experts.0.w2");
    EXPECT_EQ(n.expert(7, 0, ExpertProj::w3), "language_model.model.layers.7.block_sparse_moe.experts.0.w3");
    EXPECT_EQ(n.shared_gate_proj(7), "language_model.model.layers.7.block_sparse_moe.shared_experts.gate_proj");
    EXPECT_EQ(n.shared_up_proj(7), "language_model.model.layers.7.block_sparse_moe.shared_experts.up_proj");
    EXPECT_EQ(n.shared_down_proj(7), "language_model.model.layers.7.block_sparse_moe.shared_experts.down_proj");
}

TEST(WeightNames, TextOnlyPrefix) {
    const WeightNames n(WeightPrefixStyle::text_only);
    EXPECT_EQ(n.embed_tokens(), "model.embed_tokens.weight");
    EXPECT_EQ(n.final_norm(), "model.norm.weight");
    EXPECT_EQ(n.lm_head(), "lm_head.weight");
    EXPECT_EQ(n.q_proj(0), "model.layers.0.self_attn.q_proj");
    EXPECT_EQ(n.expert(1, 2, ExpertProj::w3), "model.layers.1.block_sparse_moe.experts.2.w3");
}

TEST(WeightNames, DetectsPrefixStyleAndVisionTensors) {
    const std::vector<std::string_view> vl = {"vision_tower.x.weight", "language_model.model.norm.weight"};
    const std::vector<std::string_view> text = {"model.norm.weight", "lm_head.weight"};
    EXPECT_EQ(WeightNames::detect(vl).style(), WeightPrefixStyle::vision_language);
    EXPECT_EQ(WeightNames::detect(text).style(), WeightPrefixStyle::text_only);

    EXPECT_TRUE(is_vision_tensor("vision_tower.blocks.0.attn.qkv.weight"));
    EXPECT_TRUE(is_vision_tensor("multi_modal_projector.linear_1.weight"));
    EXPECT_TRUE(is_vision_tensor("patch_merge_mlp.0.weight"));
    EXPECT_TRUE(is_vision_tensor("model.vision_tower.blocks.0.weight"));
    EXPECT_FALSE(is_vision_tensor("language_model.model.layers.0.input_layernorm.weight"));
    EXPECT_FALSE(is_vision_tensor("vision_towerx.weight"));
    EXPECT_FALSE(is_vision_tensor("lm_head.weight"));
}

// ---- binding ------------------------------------------------------------------------------------------------

CheckpointWeights bind(const TempDir& dir, const Checkpoint& checkpoint) {
    return bind_checkpoint_weights(load_model_config(dir.path().string()), checkpoint);
}

std::string bind_error(const nlohmann::json& config, const test::TensorMap& tensors) {
    TempDir dir;
    test::write_checkpoint(dir.path(), config, tensors);
    const std::string message = error_of([&] {
        const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
        (void)bind(dir, checkpoint);
    });
    return message;
}

TEST(CheckpointWeights, BindsVisionLanguageCheckpointWithNvfp4Experts) {
    TempDir dir;
    const auto config = test::small_config();
    const GeneratorOptions options;  // VL prefix, BF16 projections, NVFP4 experts, vision tensors
    const auto tensors = test::checkpoint_tensors(config, options);
    test::write_checkpoint(dir.path(), config, tensors, 20'000);
    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    ASSERT_GT(checkpoint.shards().size(), 1u);
    const CheckpointWeights w = bind(dir, checkpoint);

    EXPECT_EQ(w.names.style(), WeightPrefixStyle::vision_language);
    EXPECT_EQ(w.embed_tokens->name, "language_model.model.embed_tokens.weight");
    EXPECT_EQ(w.lm_head.weight->name, "language_model.lm_head.weight");
    EXPECT_EQ(w.lm_head.format, WeightFormat::BF16);
    ASSERT_EQ(w.layers.size(), 4u);
    EXPECT_FALSE(w.layers[0].moe);
    EXPECT_FALSE(w.layers[0].msa);
    EXPECT_EQ(w.layers[0].mlp_down_proj.out_features, 64);
    EXPECT_EQ(w.layers[0].mlp_down_proj.in_features, 96);
    EXPECT_FALSE(w.layers[0].index_q_proj.bound());
    EXPECT_TRUE(w.layers[2].msa);
    EXPECT_EQ(w.layers[2].index_q_proj.out_features, 64);
    EXPECT_EQ(w.layers[2].index_k_norm->shape, (std::vector<std::int64_t>{32}));
    const LayerWeights& moe = w.layers[3];
    EXPECT_TRUE(moe.moe);
    EXPECT_EQ(moe.q_proj.format, WeightFormat::BF16);
    EXPECT_EQ(moe.router_gate->dtype, DType::F32);
    EXPECT_EQ(moe.router_bias->name, "language_model.model.layers.3.block_sparse_moe.e_score_correction_bias");
    ASSERT_EQ(moe.experts.size(), 4u);
    const LinearWeight& w2 = moe.experts[3].w2;
    EXPECT_EQ(w2.format, WeightFormat::NVFP4);
    EXPECT_EQ(w2.weight->shape, (std::vector<std::int64_t>{64, 16}));
    EXPECT_EQ(w2.scale->shape, (std::vector<std::int64_t>{64, 2}));
    EXPECT_EQ(w2.global_scale->dtype, DType::F32);
    EXPECT_EQ(w2.input_scale, nullptr);
    EXPECT_EQ(w2.stored_bytes(), 64u * 16 + 64 * 2 + 4);
    EXPECT_TRUE(moe.has_shared_expert);
    EXPECT_EQ(moe.shared_down_proj.in_features, 64);
    EXPECT_EQ(w.vision.size(), 3u);
    EXPECT_TRUE(w.unused.empty());

    // Every non-vision tensor the generator wrote is bound, and model_weight_specs names exactly those modules.
    std::set<std::string> generated;
    for (const auto& [name, tensor] : tensors) {
        if (!is_vision_tensor(name)) {
            generated.insert(name);
        }
    }
    std::set<std::string> from_specs;
    for (const auto& spec : model_weight_specs(load_model_config(dir.path().string()), w.names)) {
        if (!spec.linear) {
            from_specs.insert(spec.name);
            continue;
        }
        for (const char* suffix : {".weight", ".weight_scale", ".weight_scale_2"}) {
            if (tensors.count(spec.name + suffix) != 0) {
                from_specs.insert(spec.name + suffix);
            }
        }
    }
    EXPECT_EQ(from_specs, generated);
}

TEST(CheckpointWeights, BindsTextOnlyMxfp8CheckpointWithAlternativeBiasAndSharedScale) {
    TempDir dir;
    const auto config = test::small_config();
    GeneratorOptions options;
    options.vl_prefix = false;
    options.projections = StoredFormat::mxfp8;
    options.vision_tensors = false;
    options.bias_in_gate = true;
    options.shared_scale2 = true;
    auto tensors = test::checkpoint_tensors(config, options);
    tensors["model.layers.1.block_sparse_moe.experts.0.w1.input_scale"] = {DType::F32, {1}};
    tensors["model.mtp.0.some_projection.weight"] = {DType::BF16, {4, 4}};
    test::write_checkpoint(dir.path(), config, tensors);
    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    const CheckpointWeights w = bind(dir, checkpoint);

    EXPECT_EQ(w.names.style(), WeightPrefixStyle::text_only);
    EXPECT_EQ(w.lm_head.weight->name, "lm_head.weight");
    const LayerWeights& layer = w.layers[2];
    EXPECT_EQ(layer.q_proj.format, WeightFormat::MXFP8);
    EXPECT_EQ(layer.q_proj.scale->shape, (std::vector<std::int64_t>{128, 2}));
    EXPECT_EQ(layer.index_k_proj.format, WeightFormat::MXFP8);
    EXPECT_EQ(layer.router_bias->name, "model.layers.2.block_sparse_moe.gate.e_score_correction_bias");
    // w3 shares w1's global scale.
    EXPECT_EQ(layer.experts[1].w3.global_scale, layer.experts[1].w1.global_scale);
    EXPECT_EQ(w.layers[1].experts[0].w1.input_scale->name, "model.layers.1.block_sparse_moe.experts.0.w1.input_scale");
    ASSERT_EQ(w.unused.size(), 1u);
    EXPECT_EQ(w.unused[0]->name, "model.mtp.0.some_projection.weight");
}

TEST(CheckpointWeights, TiedEmbeddingsServeAsLmHead) {
    TempDir dir;
    auto config = test::small_config();
    config["tie_word_embeddings"] = true;
    test::write_checkpoint(dir.path(), config, test::checkpoint_tensors(config, {}));
    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    const CheckpointWeights w = bind(dir, checkpoint);
    EXPECT_EQ(w.lm_head.weight, w.embed_tokens);
    EXPECT_EQ(w.lm_head.out_features, 96);
}

TEST(CheckpointWeights, Float32Projections) {
    TempDir dir;
    const auto config = test::small_config();
    GeneratorOptions options;
    options.projections = StoredFormat::f32;
    options.experts = StoredFormat::f32;
    test::write_checkpoint(dir.path(), config, test::checkpoint_tensors(config, options));
    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    EXPECT_EQ(bind(dir, checkpoint).layers[1].experts[0].w2.format, WeightFormat::F32);
}

// ---- binding errors name the tensor (and its file) ----------------------------------------------------------

TEST(CheckpointWeightsErrors, MissingTensors) {
    const auto config = test::small_config();
    const std::string q_norm = "language_model.model.layers.2.self_attn.index_k_norm.weight";
    auto tensors = test::checkpoint_tensors(config, {});
    tensors.erase(q_norm);
    EXPECT_THAT(bind_error(config, tensors), ::testing::AllOf(HasSubstr(q_norm), HasSubstr("is missing")));

    tensors = test::checkpoint_tensors(config, {});
    tensors.erase("language_model.model.layers.1.block_sparse_moe.experts.2.w2.weight");
    EXPECT_THAT(bind_error(config, tensors),
                HasSubstr("\"language_model.model.layers.1.block_sparse_moe.experts.2.w2.weight\" is missing"));

    tensors = test::checkpoint_tensors(config, {});
    tensors.erase("language_model.model.layers.3.block_sparse_moe.e_score_correction_bias");
    EXPECT_THAT(bind_error(config, tensors), ::testing::AllOf(HasSubstr("e_score_correction_bias\""), HasSubstr("(or "),
                                                              HasSubstr("gate.e_score_correction_bias")));

    tensors = test::checkpoint_tensors(config, {});
    tensors.erase("language_model.lm_head.weight");
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("\"language_model.lm_head.weight\" is missing"));

    // NVFP4 without its global scale (and no sibling to share).
    tensors = test::checkpoint_tensors(config, {});
    tensors.erase("language_model.model.layers.1.block_sparse_moe.experts.0.w2.weight_scale_2");
    EXPECT_THAT(bind_error(config, tensors),
                ::testing::AllOf(HasSubstr("experts.0.w2.weight\""), HasSubstr("weight_scale_2 is missing")));
    tensors = test::checkpoint_tensors(config, {});
    tensors.erase("language_model.model.layers.1.block_sparse_moe.experts.0.w2.weight_scale");
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("weight_scale is missing"));

    GeneratorOptions mx;
    mx.projections = StoredFormat::mxfp8;
    tensors = test::checkpoint_tensors(config, mx);
    tensors.erase("language_model.model.layers.0.self_attn.o_proj.weight_scale_inv");
    EXPECT_THAT(bind_error(config, tensors),
                ::testing::AllOf(HasSubstr("self_attn.o_proj.weight\" is F8_E4M3"), HasSubstr("weight_scale_inv")));
}

TEST(CheckpointWeightsErrors, WrongShapesAndDtypes) {
    const auto config = test::small_config();
    const std::string q_proj = "language_model.model.layers.1.self_attn.q_proj.weight";
    auto tensors = test::checkpoint_tensors(config, {});
    tensors[q_proj].shape = {96, 64};
    const std::string message = bind_error(config, tensors);
    EXPECT_THAT(message, ::testing::AllOf(HasSubstr(q_proj), HasSubstr("shape [96, 64], expected [128, 64]"),
                                          HasSubstr("model.safetensors")));

    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.norm.weight"] = {DType::U8, {64}};
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("norm.weight\" is U8, expected BF16, F16 or F32"));

    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.2.self_attn.q_norm.weight"].shape = {64};
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("q_norm.weight\" has shape [64], expected [32]"));

    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.1.block_sparse_moe.experts.1.w1.weight_scale_2"].shape = {2};
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("expected [] or [1]"));

    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.1.block_sparse_moe.experts.1.w1.weight_scale"].dtype = DType::U8;
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("w1.weight_scale\" is U8, expected F8_E4M3"));

    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.1.block_sparse_moe.experts.1.w1.weight"].shape = {32, 64};
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("expected [32, 32] (NVFP4 weight [out, in / 2]"));

    // A BF16 weight with quantisation scales beside it is inconsistent.
    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.0.self_attn.k_proj.weight_scale_inv"] = {DType::U8, {64, 2}};
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("k_proj.weight\" is BF16 but quantisation scales"));

    // An integer weight is no linear format.
    tensors = test::checkpoint_tensors(config, {});
    tensors["language_model.model.layers.0.self_attn.k_proj.weight"].dtype = DType::I32;
    EXPECT_THAT(bind_error(config, tensors), HasSubstr("k_proj.weight\" is I32; a linear weight must be"));

    // The config says layer 0 is MoE but the checkpoint has a dense MLP there.
    auto moe_config = config;
    moe_config["moe_layer_freq"] = {1, 1, 1, 1};
    EXPECT_THAT(bind_error(moe_config, test::checkpoint_tensors(config, {})),
                HasSubstr("layers.0.block_sparse_moe.gate.weight\" is missing"));
}

// ---- model summary ------------------------------------------------------------------------------------------

// The same model counted two independent ways agrees: from the shard headers of a generated checkpoint stored the
// way the estimate assumes (MXFP8 projections, NVFP4 experts, BF16 norms/embeddings, F32 router), and from the
// config alone.
TEST(ModelSummary, HeaderCountEqualsConfigEstimate) {
    TempDir dir;
    auto config = test::small_config();
    config["quantization_config"] = {{"quant_method", "mxfp8"}, {"moe_activation_quant", "nvfp4_row_scaled"}};
    GeneratorOptions options;
    options.projections = StoredFormat::mxfp8;
    options.experts = StoredFormat::nvfp4;
    test::write_checkpoint(dir.path(), config, test::checkpoint_tensors(config, options));
    const ModelConfig c = load_model_config(dir.path().string());
    const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
    const WeightSummary counted = summarize_weights(c, bind_checkpoint_weights(c, checkpoint), checkpoint);
    const WeightSummary estimated = estimate_weights(c);
    EXPECT_TRUE(counted.from_headers);
    EXPECT_FALSE(estimated.from_headers);
    EXPECT_EQ(counted.total.params, estimated.total.params);
    EXPECT_EQ(counted.total.bytes, estimated.total.bytes);
    EXPECT_EQ(counted.total.tensors, estimated.total.tensors);
    ASSERT_EQ(counted.by_format.size(), estimated.by_format.size());
    for (const auto& [format, count] : counted.by_format) {
        EXPECT_EQ(count.params, estimated.by_format.at(format).params) << weight_format_name(format);
        EXPECT_EQ(count.bytes, estimated.by_format.at(format).bytes) << weight_format_name(format);
    }
    EXPECT_EQ(counted.active_params, estimated.active_params);
    EXPECT_EQ(counted.vision.tensors, 3u);

    // Hand count of the parameters (model.md shapes): embedding + lm_head, per-layer attention, norms, indexer,
    // dense MLP, router, experts, shared expert.
    const std::uint64_t attention = 128 * 64 + 64 * 64 + 64 * 64 + 64 * 128 + 32 + 32 + 64 + 64;
    const std::uint64_t indexer = 64 * 64 + 32 * 64 + 32 + 32;
    const std::uint64_t dense = 3 * 96 * 64;
    const std::uint64_t expert = 3 * 32 * 64;
    const std::uint64_t moe = 4 * 64 + 4 + 4 * expert + 3 * 64 * 64;
    const std::uint64_t total = 2 * 96 * 64 + 64 + 4 * attention + 2 * indexer + dense + 3 * moe;
    EXPECT_EQ(counted.total.params, total);
    // Per token only top-2 of the 4 experts run.
    EXPECT_EQ(counted.active_params, total - 3 * 2 * expert);
    EXPECT_EQ(counted.embedding_params, 2u * 96 * 64);
    // Stored bytes of one NVFP4 expert projection [32, 64]: 32 x 32 codes + 32 x 4 scales + 4.
    EXPECT_EQ(counted.by_format.at(WeightFormat::NVFP4).bytes,
              3u * 4 * (2 * (32 * 32 + 32 * 4 + 4) + 64 * 16 + 64 * 2 + 4));
}

TEST(ModelSummary, KvFootprintPerRankAndCapacity) {
    const ModelConfig m3 = load_model_config(std::string(MSA_SOURCE_DIR) + "/examples/minimax-m3");
    EXPECT_EQ(kv_footprint(m3, KvCacheDtype::NVFP4, 1).kv_bytes, 34'560u);
    // TP 4: one KV head per rank; index keys (one head) replicated.
    EXPECT_EQ(kv_footprint(m3, KvCacheDtype::NVFP4, 4).kv_bytes, 34'560u / 4);
    EXPECT_EQ(kv_footprint(m3, KvCacheDtype::NVFP4, 4).index_bytes, 57u * 72);
    // TP 8: KV heads replicated, still one per rank.
    EXPECT_EQ(kv_footprint(m3, KvCacheDtype::FP8, 8).kv_bytes, 61'440u / 4);
    EXPECT_THAT(error_of([&] { (void)kv_footprint(m3, KvCacheDtype::FP8, 3); }), HasSubstr("tensor parallel size 3"));

    CapacityRequest request;
    request.context_tokens = 1000;  // rounds up to 8 pages of 128 tokens
    request.gpu_memory_gib = 1;
    request.memory_utilization = 0.5;
    request.tp = 1;
    const std::uint64_t weights = 100ull << 20;
    const CapacityPlan plan = plan_capacity(m3, weights, KvCacheDtype::NVFP4, request);
    EXPECT_EQ(plan.tokens_per_sequence, 1024);
    EXPECT_EQ(plan.usable_bytes, 512ull << 20);
    EXPECT_EQ(plan.cache_bytes, static_cast<std::int64_t>(412ull << 20));
    EXPECT_EQ(plan.bytes_per_sequence, 1024u * (34'560 + 57 * 72));
    EXPECT_EQ(plan.max_sequences, static_cast<std::int64_t>((412ull << 20) / (1024u * (34'560 + 57 * 72))));
    EXPECT_EQ(plan.max_cached_tokens, static_cast<std::int64_t>((412ull << 20) / (34'560 + 57 * 72)));
    // Weights larger than the usable memory: nothing fits.
    const CapacityPlan none = plan_capacity(m3, 600ull << 20, KvCacheDtype::NVFP4, request);
    EXPECT_LT(none.cache_bytes, 0);
    EXPECT_EQ(none.max_sequences, 0);
    request.context_tokens = m3.max_position_embeddings + 1;
    EXPECT_THAT(error_of([&] { (void)plan_capacity(m3, weights, KvCacheDtype::NVFP4, request); }),
                HasSubstr("max_position_embeddings"));
}

}  // namespace
}  // namespace msa
