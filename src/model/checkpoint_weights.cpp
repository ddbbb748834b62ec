#include "model/checkpoint_weights.h"

#include "core/error.h"
#include "formats/message_text.h"

#include <fmt/format.h>

#include <unordered_set>

namespace msa {

std::string_view weight_format_name(WeightFormat format) {
    switch (format) {
        case WeightFormat::BF16:
            return "BF16";
        case WeightFormat::F16:
            return "F16";
        case WeightFormat::F32:
            return "F32";
        case WeightFormat::MXFP8:
            return "MXFP8";
        case WeightFormat::NVFP4:
            return "NVFP4";
    }
    return "?";
}

std::string_view weight_group_name(WeightGroup group) {
    switch (group) {
        case WeightGroup::embedding:
            return "embedding";
        case WeightGroup::lm_head:
            return "lm_head";
        case WeightGroup::norm:
            return "norms";
        case WeightGroup::attention:
            return "attention";
        case WeightGroup::indexer:
            return "MSA indexer";
        case WeightGroup::dense_mlp:
            return "dense MLP";
        case WeightGroup::router:
            return "router";
        case WeightGroup::routed_expert:
            return "routed experts";
        case WeightGroup::shared_expert:
            return "shared expert";
    }
    return "?";
}

std::uint64_t LinearWeight::stored_bytes() const {
    std::uint64_t total = 0;
    for (const TensorView* view : {weight, scale, global_scale, input_scale}) {
        total += view != nullptr ? view->bytes.size() : 0;
    }
    return total;
}

namespace {

bool is_float_dtype(DType dtype) {
    return dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32;
}

WeightFormat float_weight_format(DType dtype) {
    return dtype == DType::BF16 ? WeightFormat::BF16 : dtype == DType::F16 ? WeightFormat::F16 : WeightFormat::F32;
}

bool is_scalar_shape(const std::vector<std::int64_t>& shape) {
    return shape.empty() || (shape.size() == 1 && shape[0] == 1);
}

void expect_shape(const TensorView& view, const std::vector<std::int64_t>& expected, std::string_view what) {
    MSA_CHECK(view.shape == expected, "{}: tensor {} has shape {}, expected {} ({})", view.file, quote_text(view.name),
              format_shape(view.shape), format_shape(expected), what);
}

void expect_dtype(const TensorView& view, DType expected, std::string_view what) {
    MSA_CHECK(view.dtype == expected, "{}: tensor {} is {}, expected {} ({})", view.file, quote_text(view.name),
              dtype_name(view.dtype), dtype_name(expected), what);
}

// Looks up tensors and records which ones were used.
class TensorFinder {
public:
    explicit TensorFinder(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

    const TensorView* find(const std::string& name) {
        const TensorView* view = checkpoint_.find(name);
        if (view != nullptr) {
            used_.insert(view);
        }
        return view;
    }
    bool used(const TensorView* view) const { return used_.count(view) != 0; }
    const Checkpoint& checkpoint() const { return checkpoint_; }

private:
    const Checkpoint& checkpoint_;
    std::unordered_set<const TensorView*> used_;
};

std::string checkpoint_name(const Checkpoint& checkpoint) {
    return checkpoint.dir().empty() ? std::string("checkpoint") : checkpoint.dir();
}

LinearWeight bind_linear_impl(TensorFinder& finder, const std::string& name, std::int64_t out, std::int64_t in,
                              const std::string& scale2_sibling) {
    LinearWeight linear;
    linear.name = name;
    linear.out_features = out;
    linear.in_features = in;
    const std::string weight_name = name + std::string(kWeightSuffix);
    linear.weight = finder.find(weight_name);
    MSA_CHECK(linear.weight != nullptr, "{}: tensor {} is missing", checkpoint_name(finder.checkpoint()),
              quote_text(weight_name));
    const TensorView& weight = *linear.weight;
    const TensorView* scale_inv = finder.find(name + std::string(kWeightScaleInvSuffix));
    const TensorView* scale = finder.find(name + std::string(kWeightScaleSuffix));
    const TensorView* scale2 = finder.find(name + std::string(kWeightScale2Suffix));
    const TensorView* input_scale = finder.find(name + std::string(kInputScaleSuffix));

    if (weight.dtype == DType::F8_E4M3) {
        MSA_CHECK(scale_inv != nullptr,
                  "{}: tensor {} is F8_E4M3 but {}{} is missing (MXFP8 needs UE8M0 block scales; per-tensor FP8 "
                  "weights are not supported)",
                  weight.file, quote_text(weight.name), name, kWeightScaleInvSuffix);
        MSA_CHECK(in % 32 == 0, "{}: tensor {} is MXFP8 but its input size {} is not a multiple of 32", weight.file,
                  quote_text(weight.name), in);
        linear.format = WeightFormat::MXFP8;
        linear.scale = scale_inv;
        expect_shape(weight, {out, in}, "MXFP8 weight [out, in]");
        expect_dtype(*scale_inv, DType::U8, "MXFP8 UE8M0 scales");
        expect_shape(*scale_inv, {out, in / 32}, "one UE8M0 scale per 32 inputs");
        MSA_CHECK(scale == nullptr && scale2 == nullptr, "{}: tensor {} is MXFP8 but NVFP4 scales are stored too",
                  weight.file, quote_text(weight.name));
        return linear;
    }
    if (weight.dtype == DType::U8) {
        MSA_CHECK(scale != nullptr, "{}: tensor {} is U8 but {}{} is missing (NVFP4 needs E4M3 block scales)",
                  weight.file, quote_text(weight.name), name, kWeightScaleSuffix);
        if (scale2 == nullptr && !scale2_sibling.empty()) {
            // w1 and w3 of an expert may share one global scale (M3.1's recipe).
            scale2 = finder.find(scale2_sibling + std::string(kWeightScale2Suffix));
        }
        MSA_CHECK(scale2 != nullptr, "{}: tensor {} is U8 but {}{} is missing (NVFP4 needs an FP32 global scale)",
                  weight.file, quote_text(weight.name), name, kWeightScale2Suffix);
        MSA_CHECK(in % 16 == 0, "{}: tensor {} is NVFP4 but its input size {} is not a multiple of 16", weight.file,
                  quote_text(weight.name), in);
        linear.format = WeightFormat::NVFP4;
        linear.scale = scale;
        linear.global_scale = scale2;
        linear.input_scale = input_scale;
        expect_shape(weight, {out, in / 2}, "NVFP4 weight [out, in / 2], two E2M1 codes per byte");
        expect_dtype(*scale, DType::F8_E4M3, "NVFP4 block scales");
        expect_shape(*scale, {out, in / 16}, "one E4M3 scale per 16 inputs");
        expect_dtype(*scale2, DType::F32, "NVFP4 global scale");
        MSA_CHECK(is_scalar_shape(scale2->shape), "{}: tensor {} has shape {}, expected [] or [1] (a global scale)",
                  scale2->file, quote_text(scale2->name), format_shape(scale2->shape));
        if (input_scale != nullptr) {
            expect_dtype(*input_scale, DType::F32, "NVFP4 activation scale");
            MSA_CHECK(is_scalar_shape(input_scale->shape),
                      "{}: tensor {} has shape {}, expected [] or [1] (a global scale)", input_scale->file,
                      quote_text(input_scale->name), format_shape(input_scale->shape));
        }
        MSA_CHECK(scale_inv == nullptr, "{}: tensor {} is NVFP4 but an MXFP8 weight_scale_inv is stored too",
                  weight.file, quote_text(weight.name));
        return linear;
    }
    MSA_CHECK(is_float_dtype(weight.dtype),
              "{}: tensor {} is {}; a linear weight must be BF16, F16, F32, MXFP8 (F8_E4M3 + weight_scale_inv) or "
              "NVFP4 (U8 + weight_scale + weight_scale_2)",
              weight.file, quote_text(weight.name), dtype_name(weight.dtype));
    MSA_CHECK(scale_inv == nullptr && scale == nullptr && scale2 == nullptr,
              "{}: tensor {} is {} but quantisation scales are stored beside it", weight.file, quote_text(weight.name),
              dtype_name(weight.dtype));
    linear.format = float_weight_format(weight.dtype);
    expect_shape(weight, {out, in}, "weight [out, in]");
    return linear;
}

// Walks every weight of the model in a fixed order. Binder looks tensors up; SpecCollector only records them.
class WeightVisitor {
public:
    virtual ~WeightVisitor() = default;
    // A plain floating-point tensor under the first of `names` that exists (alternatives are accepted spellings).
    virtual const TensorView* plain(const std::vector<std::string>& names, std::vector<std::int64_t> shape,
                                    WeightGroup group, int layer) = 0;
    virtual LinearWeight linear(const std::string& name, std::int64_t out, std::int64_t in, WeightGroup group,
                                int layer, const std::string& scale2_sibling) = 0;
};

class Binder final : public WeightVisitor {
public:
    explicit Binder(const Checkpoint& checkpoint) : finder_(checkpoint) {}

    const TensorView* plain(const std::vector<std::string>& names, std::vector<std::int64_t> shape, WeightGroup,
                            int) override {
        for (const auto& name : names) {
            if (const TensorView* view = finder_.find(name)) {
                MSA_CHECK(is_float_dtype(view->dtype), "{}: tensor {} is {}, expected BF16, F16 or F32", view->file,
                          quote_text(view->name), dtype_name(view->dtype));
                expect_shape(*view, shape, "from config.json");
                return view;
            }
        }
        std::string also;
        for (std::size_t i = 1; i < names.size(); ++i) {
            also += fmt::format(" (or {})", quote_text(names[i]));
        }
        fail("{}: tensor {}{} is missing", checkpoint_name(finder_.checkpoint()), quote_text(names[0]), also);
    }

    LinearWeight linear(const std::string& name, std::int64_t out, std::int64_t in, WeightGroup, int,
                        const std::string& scale2_sibling) override {
        return bind_linear_impl(finder_, name, out, in, scale2_sibling);
    }

    const TensorFinder& finder() const { return finder_; }

private:
    TensorFinder finder_;
};

class SpecCollector final : public WeightVisitor {
public:
    const TensorView* plain(const std::vector<std::string>& names, std::vector<std::int64_t> shape, WeightGroup group,
                            int layer) override {
        specs.push_back({names[0], false, std::move(shape), group, layer, names.size() > 1 ? names[1] : ""});
        return nullptr;
    }
    LinearWeight linear(const std::string& name, std::int64_t out, std::int64_t in, WeightGroup group, int layer,
                        const std::string&) override {
        specs.push_back({name, true, {out, in}, group, layer, ""});
        LinearWeight linear;
        linear.name = name;
        linear.out_features = out;
        linear.in_features = in;
        return linear;
    }

    std::vector<WeightSpec> specs;
};

void visit_layer(const ModelConfig& c, const WeightNames& n, int l, WeightVisitor& v, LayerWeights& layer) {
    const std::int64_t hidden = c.hidden_size;
    const std::int64_t head_dim = c.head_dim;
    layer.input_layernorm = v.plain({n.input_layernorm(l)}, {hidden}, WeightGroup::norm, l);
    layer.q_proj = v.linear(n.q_proj(l), c.q_dim(), hidden, WeightGroup::attention, l, "");
    layer.k_proj = v.linear(n.k_proj(l), c.kv_dim(), hidden, WeightGroup::attention, l, "");
    layer.v_proj = v.linear(n.v_proj(l), c.kv_dim(), hidden, WeightGroup::attention, l, "");
    layer.o_proj = v.linear(n.o_proj(l), hidden, c.q_dim(), WeightGroup::attention, l, "");
    if (c.use_qk_norm) {
        layer.q_norm = v.plain({n.q_norm(l)}, {head_dim}, WeightGroup::norm, l);
        layer.k_norm = v.plain({n.k_norm(l)}, {head_dim}, WeightGroup::norm, l);
    }
    layer.msa = c.is_msa_layer(l);
    if (layer.msa) {
        const std::int64_t index_dim = c.sparse.index_dim;
        layer.index_q_proj = v.linear(n.index_q_proj(l), c.index_q_dim(), hidden, WeightGroup::indexer, l, "");
        layer.index_k_proj = v.linear(n.index_k_proj(l), index_dim, hidden, WeightGroup::indexer, l, "");
        layer.index_q_norm = v.plain({n.index_q_norm(l)}, {index_dim}, WeightGroup::indexer, l);
        layer.index_k_norm = v.plain({n.index_k_norm(l)}, {index_dim}, WeightGroup::indexer, l);
    }
    layer.post_attention_layernorm = v.plain({n.post_attention_layernorm(l)}, {hidden}, WeightGroup::norm, l);
    layer.moe = c.is_moe_layer(l);
    if (!layer.moe) {
        const std::int64_t width = c.dense_intermediate_size;
        layer.mlp_gate_proj = v.linear(n.mlp_gate_proj(l), width, hidden, WeightGroup::dense_mlp, l, "");
        layer.mlp_up_proj = v.linear(n.mlp_up_proj(l), width, hidden, WeightGroup::dense_mlp, l, "");
        layer.mlp_down_proj = v.linear(n.mlp_down_proj(l), hidden, width, WeightGroup::dense_mlp, l, "");
        return;
    }
    const std::int64_t experts = c.num_local_experts;
    layer.router_gate = v.plain({n.router_gate(l)}, {experts, hidden}, WeightGroup::router, l);
    if (c.use_routing_bias) {
        layer.router_bias = v.plain({n.router_bias(l), n.router_bias_in_gate(l)}, {experts}, WeightGroup::router, l);
    }
    const std::int64_t width = c.intermediate_size;
    layer.experts.resize(static_cast<std::size_t>(experts));
    for (int e = 0; e < c.num_local_experts; ++e) {
        ExpertWeights& expert = layer.experts[static_cast<std::size_t>(e)];
        const std::string w1 = n.expert(l, e, ExpertProj::w1);
        const std::string w3 = n.expert(l, e, ExpertProj::w3);
        expert.w1 = v.linear(w1, width, hidden, WeightGroup::routed_expert, l, w3);
        expert.w3 = v.linear(w3, width, hidden, WeightGroup::routed_expert, l, w1);
        expert.w2 = v.linear(n.expert(l, e, ExpertProj::w2), hidden, width, WeightGroup::routed_expert, l, "");
    }
    layer.has_shared_expert = c.n_shared_experts == 1;
    if (layer.has_shared_expert) {
        const std::int64_t shared = c.shared_intermediate_size;
        layer.shared_gate_proj = v.linear(n.shared_gate_proj(l), shared, hidden, WeightGroup::shared_expert, l, "");
        layer.shared_up_proj = v.linear(n.shared_up_proj(l), shared, hidden, WeightGroup::shared_expert, l, "");
        layer.shared_down_proj = v.linear(n.shared_down_proj(l), hidden, shared, WeightGroup::shared_expert, l, "");
    }
}

void visit_model(const ModelConfig& c, const WeightNames& n, WeightVisitor& v, CheckpointWeights& weights) {
    const std::int64_t vocab = c.vocab_size;
    const std::int64_t hidden = c.hidden_size;
    weights.embed_tokens = v.plain({n.embed_tokens()}, {vocab, hidden}, WeightGroup::embedding, -1);
    weights.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        visit_layer(c, n, l, v, weights.layers[static_cast<std::size_t>(l)]);
    }
    weights.final_norm = v.plain({n.final_norm()}, {hidden}, WeightGroup::norm, -1);
    if (!c.tie_word_embeddings) {
        weights.lm_head = v.linear(n.lm_head().substr(0, n.lm_head().size() - kWeightSuffix.size()), vocab, hidden,
                                   WeightGroup::lm_head, -1, "");
    }
}

}  // namespace

LinearWeight bind_linear(const Checkpoint& checkpoint, const std::string& name, std::int64_t out_features,
                         std::int64_t in_features) {
    TensorFinder finder(checkpoint);
    return bind_linear_impl(finder, name, out_features, in_features, "");
}

std::vector<WeightSpec> model_weight_specs(const ModelConfig& config, const WeightNames& names) {
    SpecCollector collector;
    CheckpointWeights ignored{names};
    visit_model(config, names, collector, ignored);
    return std::move(collector.specs);
}

CheckpointWeights bind_checkpoint_weights(const ModelConfig& config, const Checkpoint& checkpoint) {
    std::vector<std::string_view> tensor_names;
    tensor_names.reserve(checkpoint.tensors().size());
    for (const TensorView* view : checkpoint.tensors()) {
        tensor_names.push_back(view->name);
    }
    CheckpointWeights weights{WeightNames::detect(tensor_names)};
    Binder binder(checkpoint);
    visit_model(config, weights.names, binder, weights);
    if (config.tie_word_embeddings) {
        const TensorView& embed = *weights.embed_tokens;
        weights.lm_head.name = embed.name.substr(0, embed.name.size() - kWeightSuffix.size());
        weights.lm_head.format = float_weight_format(embed.dtype);
        weights.lm_head.out_features = config.vocab_size;
        weights.lm_head.in_features = config.hidden_size;
        weights.lm_head.weight = weights.embed_tokens;
    }
    for (const TensorView* view : checkpoint.tensors()) {
        if (is_vision_tensor(view->name)) {
            weights.vision.push_back(view);
        } else if (!binder.finder().used(view)) {
            weights.unused.push_back(view);
        }
    }
    return weights;
}

}  // namespace msa
