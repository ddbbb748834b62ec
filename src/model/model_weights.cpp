#include "model/model_weights.h"

#include "core/error.h"
#include "formats/scalar_formats.h"

#include <cstring>

namespace msa {
namespace {

LinearFormat linear_format(WeightFormat f) {
    switch (f) {
        case WeightFormat::BF16: return LinearFormat::bf16;
        case WeightFormat::F16: return LinearFormat::f16;
        case WeightFormat::F32: return LinearFormat::f32;
        case WeightFormat::MXFP8: return LinearFormat::mxfp8;
        case WeightFormat::NVFP4: return LinearFormat::nvfp4;
    }
    return LinearFormat::f32;
}

// A plain (unquantised) 2-D tensor as a weight view: embeddings and the router gate.
WeightView plain_view(const TensorView& t) {
    MSA_CHECK(t.rank() == 2, "{} must be 2-D", t.describe());
    WeightView v;
    switch (t.dtype) {
        case DType::F32: v.format = LinearFormat::f32; break;
        case DType::BF16: v.format = LinearFormat::bf16; break;
        case DType::F16: v.format = LinearFormat::f16; break;
        default: fail("{} must be F32, BF16 or F16", t.describe());
    }
    v.rows = t.shape[0];
    v.cols = t.shape[1];
    v.data = t.data();
    return v;
}

// A 1-D tensor (norm weights, router bias) as floats.
std::vector<float> to_floats(const TensorView& t) {
    const auto n = static_cast<std::size_t>(t.numel());
    std::vector<float> out(n);
    const std::uint8_t* p = t.bytes.data();
    for (std::size_t i = 0; i < n; ++i) {
        switch (t.dtype) {
            case DType::F32: std::memcpy(&out[i], p + 4 * i, 4); break;
            case DType::BF16: {
                std::uint16_t b;
                std::memcpy(&b, p + 2 * i, 2);
                out[i] = bf16_to_float(b);
                break;
            }
            case DType::F16: {
                std::uint16_t b;
                std::memcpy(&b, p + 2 * i, 2);
                out[i] = fp16_to_float(b);
                break;
            }
            default: fail("{} must be F32, BF16 or F16", t.describe());
        }
    }
    return out;
}

const float* adopt_vector(Backend& backend, const TensorView* t) {
    if (t == nullptr) return nullptr;
    const auto v = to_floats(*t);
    return backend.adopt_floats(v);
}

WeightView adopt_linear(Backend& backend, const LinearWeight& w) { return backend.adopt_weight(linear_weight_view(w)); }

ExpertWeightsView adopt_expert(Backend& backend, const LinearWeight& gate, const LinearWeight& up,
                               const LinearWeight& down) {
    return {adopt_linear(backend, gate), adopt_linear(backend, up), adopt_linear(backend, down)};
}

}  // namespace

WeightView linear_weight_view(const LinearWeight& weight) {
    MSA_CHECK(weight.bound(), "linear weight '{}' is not bound", weight.name);
    WeightView v;
    v.format = linear_format(weight.format);
    v.rows = weight.out_features;
    v.cols = weight.in_features;
    v.data = weight.weight->data();
    v.scales = weight.scale != nullptr ? weight.scale->bytes.data() : nullptr;
    if (weight.format == WeightFormat::NVFP4) {
        MSA_CHECK(weight.global_scale != nullptr && weight.global_scale->bytes.size() == 4,
                  "NVFP4 weight '{}' needs a one-element F32 weight_scale_2", weight.name);
        std::memcpy(&v.global_scale, weight.global_scale->bytes.data(), 4);
    }
    return v;
}

ModelWeights make_model_weights(const ModelConfig& config, const CheckpointWeights& bound, Backend& backend,
                                const std::vector<bool>& msa_layers, int topk_blocks) {
    ModelWeights w;
    w.embed_tokens = backend.adopt_weight(plain_view(*bound.embed_tokens));
    w.final_norm = adopt_vector(backend, bound.final_norm);
    w.lm_head = adopt_linear(backend, bound.lm_head);
    w.layers.resize(bound.layers.size());
    for (std::size_t l = 0; l < bound.layers.size(); ++l) {
        const LayerWeights& b = bound.layers[l];
        DecoderLayerWeights& d = w.layers[l];
        d.input_layernorm = adopt_vector(backend, b.input_layernorm);
        d.post_attention_layernorm = adopt_vector(backend, b.post_attention_layernorm);
        d.q_proj = adopt_linear(backend, b.q_proj);
        d.k_proj = adopt_linear(backend, b.k_proj);
        d.v_proj = adopt_linear(backend, b.v_proj);
        d.o_proj = adopt_linear(backend, b.o_proj);

        AttentionLayer& a = d.attention;
        a.num_heads = config.num_attention_heads;
        a.num_kv_heads = config.num_key_value_heads;
        a.head_dim = config.head_dim;
        a.rotary_dim = config.rotary_dim;
        a.rope_theta = config.rope_theta;
        a.norm_eps = static_cast<float>(config.rms_norm_eps);
        a.q_norm = adopt_vector(backend, b.q_norm);
        a.k_norm = adopt_vector(backend, b.k_norm);
        a.msa = msa_layers[l];
        if (a.msa) {
            MSA_CHECK(b.msa, "layer {} has no index projections in the checkpoint, so it cannot run MSA", l);
            d.index_q_proj = adopt_linear(backend, b.index_q_proj);
            d.index_k_proj = adopt_linear(backend, b.index_k_proj);
            a.index_dim = config.sparse.index_dim;
            a.topk_blocks = topk_blocks;
            a.index_q_norm = adopt_vector(backend, b.index_q_norm);
            a.index_k_norm = adopt_vector(backend, b.index_k_norm);
        }

        d.moe = b.moe;
        if (!b.moe) {
            d.mlp = adopt_expert(backend, b.mlp_gate_proj, b.mlp_up_proj, b.mlp_down_proj);
            continue;
        }
        for (const ExpertWeights& e : b.experts) d.experts.push_back(adopt_expert(backend, e.w1, e.w3, e.w2));
        d.has_shared_expert = b.has_shared_expert;
        if (b.has_shared_expert) {
            d.shared_expert = adopt_expert(backend, b.shared_gate_proj, b.shared_up_proj, b.shared_down_proj);
        }
        d.router = backend.adopt_weight(plain_view(*b.router_gate));
        d.router_bias = adopt_vector(backend, b.router_bias);
        d.top_k = config.num_experts_per_tok;
        d.routed_scaling_factor = static_cast<float>(config.routed_scaling_factor);
        d.w4a4 = config.quantization.moe_activation_nvfp4_row_scaled;
    }
    return w;
}

MoeLayer DecoderLayerWeights::moe_layer() const {
    MoeLayer m;
    m.router = router;
    m.router_bias = router_bias;
    m.top_k = top_k;
    m.routed_scaling_factor = routed_scaling_factor;
    m.experts = experts;
    m.shared = has_shared_expert ? &shared_expert : nullptr;
    m.w4a4 = w4a4;
    return m;
}

}  // namespace msa
