#include "model/model_summary.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cmath>

namespace msa {

namespace {

std::uint64_t numel(const std::vector<std::int64_t>& shape) {
    std::uint64_t n = 1;
    for (auto d : shape) {
        n *= static_cast<std::uint64_t>(d);
    }
    return n;
}

// Stored bytes of a linear [out, in] weight in `format` (scales included; NVFP4 with one FP32 global scale).
std::uint64_t linear_bytes(WeightFormat format, std::uint64_t out, std::uint64_t in) {
    switch (format) {
        case WeightFormat::BF16:
        case WeightFormat::F16:
            return 2 * out * in;
        case WeightFormat::F32:
            return 4 * out * in;
        case WeightFormat::MXFP8:
            return out * in + out * (in / 32);
        case WeightFormat::NVFP4:
            return out * (in / 2) + out * (in / 16) + 4;
    }
    return 0;
}

std::uint64_t linear_tensor_count(WeightFormat format) {
    return format == WeightFormat::MXFP8 ? 2 : format == WeightFormat::NVFP4 ? 3 : 1;
}

WeightFormat format_of_dtype(DType dtype) {
    switch (dtype) {
        case DType::F8_E4M3:
            return WeightFormat::MXFP8;
        case DType::U8:
            return WeightFormat::NVFP4;
        case DType::F16:
            return WeightFormat::F16;
        case DType::F32:
            return WeightFormat::F32;
        default:
            return WeightFormat::BF16;
    }
}

void add_weight(WeightSummary& summary, const WeightSpec& spec, WeightFormat format, const ParamCount& count) {
    summary.by_format[format].add(count);
    summary.by_group[spec.group].add(count);
    summary.total.add(count);
    if (spec.group == WeightGroup::embedding || spec.group == WeightGroup::lm_head) {
        summary.embedding_params += count.params;
    }
}

// Routed experts: only top-k of E run per token.
void finish_active(const ModelConfig& config, WeightSummary& summary) {
    summary.active_params = summary.total.params;
    const auto it = summary.by_group.find(WeightGroup::routed_expert);
    if (it != summary.by_group.end() && config.num_local_experts > 0) {
        const std::uint64_t idle = static_cast<std::uint64_t>(config.num_local_experts - config.num_experts_per_tok);
        summary.active_params -= it->second.params / static_cast<std::uint64_t>(config.num_local_experts) * idle;
    }
}

ParamCount count_of(const TensorView& view) {
    return {1, static_cast<std::uint64_t>(view.numel()), view.bytes.size()};
}

}  // namespace

WeightSummary summarize_weights(const ModelConfig& config, const CheckpointWeights& weights,
                                const Checkpoint& checkpoint) {
    WeightSummary summary;
    summary.from_headers = true;
    for (const TensorView* view : checkpoint.tensors()) {
        summary.by_dtype[std::string(dtype_name(view->dtype))].add(count_of(*view));
    }
    for (const auto& spec : model_weight_specs(config, weights.names)) {
        if (!spec.linear) {
            const TensorView* view = checkpoint.find(spec.name);
            if (view == nullptr && !spec.alternative_name.empty()) {
                view = checkpoint.find(spec.alternative_name);
            }
            MSA_CHECK(view != nullptr, "{}: tensor {} is missing", checkpoint.dir(), spec.name);
            add_weight(summary, spec, format_of_dtype(view->dtype), count_of(*view));
            continue;
        }
        const TensorView& weight = checkpoint.get(spec.name + std::string(kWeightSuffix));
        ParamCount count{0, numel(spec.shape), 0};
        for (auto suffix :
             {kWeightSuffix, kWeightScaleInvSuffix, kWeightScaleSuffix, kWeightScale2Suffix, kInputScaleSuffix}) {
            if (const TensorView* view = checkpoint.find(spec.name + std::string(suffix))) {
                count.tensors += 1;
                count.bytes += view->bytes.size();
            }
        }
        add_weight(summary, spec, format_of_dtype(weight.dtype), count);
    }
    for (const TensorView* view : weights.vision) {
        summary.vision.add(count_of(*view));
    }
    for (const TensorView* view : weights.unused) {
        summary.unused.add(count_of(*view));
    }
    finish_active(config, summary);
    summary.notes.push_back(
        fmt::format("counted from the headers of {} safetensors file(s)", checkpoint.shards().size()));
    return summary;
}

WeightSummary estimate_weights(const ModelConfig& config) {
    WeightSummary summary;
    const QuantizationConfig& quant = config.quantization;
    WeightFormat plain = WeightFormat::BF16;
    if (config.dtype == "float32") {
        plain = WeightFormat::F32;
    } else if (config.dtype == "float16") {
        plain = WeightFormat::F16;
    }
    WeightFormat projections = plain;
    if (quant.quant_method == "mxfp8") {
        projections = WeightFormat::MXFP8;
        summary.notes.push_back("projections assumed MXFP8 (quantization_config.quant_method \"mxfp8\")");
    } else if (!quant.quant_method.empty()) {
        summary.notes.push_back(
            fmt::format("quantization_config.quant_method \"{}\" is not modelled: projections assumed {}",
                        quant.quant_method, weight_format_name(plain)));
    } else {
        summary.notes.push_back(
            fmt::format("no quantization_config: projections assumed {}", weight_format_name(plain)));
    }
    WeightFormat experts = projections;
    if (quant.moe_activation_nvfp4_row_scaled) {
        experts = WeightFormat::NVFP4;
        summary.notes.push_back("routed experts assumed NVFP4 (quantization_config.moe_activation_quant)");
    }
    summary.notes.push_back(
        fmt::format("embedding, lm_head and norms assumed {}; router gate and bias F32", weight_format_name(plain)));

    for (const auto& spec : model_weight_specs(config, WeightNames())) {
        const std::uint64_t params = numel(spec.shape);
        if (!spec.linear) {
            const WeightFormat format = spec.group == WeightGroup::router ? WeightFormat::F32 : plain;
            const std::uint64_t element = format == WeightFormat::F32 ? 4 : 2;
            add_weight(summary, spec, format, {1, params, params * element});
            continue;
        }
        WeightFormat format = projections;
        if (spec.group == WeightGroup::lm_head) {
            format = plain;
        } else if (spec.group == WeightGroup::routed_expert) {
            format = experts;
        }
        const auto out = static_cast<std::uint64_t>(spec.shape[0]);
        const auto in = static_cast<std::uint64_t>(spec.shape[1]);
        add_weight(summary, spec, format, {linear_tensor_count(format), params, linear_bytes(format, out, in)});
    }
    finish_active(config, summary);
    return summary;
}

KvFootprint kv_footprint(const ModelConfig& config, KvCacheDtype dtype, int tp) {
    const int heads = config.num_key_value_heads;
    MSA_CHECK(tp >= 1 && (heads % tp == 0 || tp % heads == 0),
              "tensor parallel size {} must divide num_key_value_heads ({}) or be a multiple of it", tp, heads);
    const int heads_per_rank = heads % tp == 0 ? heads / tp : 1;  // KV heads are replicated when tp > heads
    KvFootprint footprint;
    footprint.dtype = dtype;
    footprint.kv_bytes = config.kv_bytes_per_token(dtype) / static_cast<std::uint64_t>(heads) *
                         static_cast<std::uint64_t>(heads_per_rank);
    footprint.index_bytes = config.index_k_bytes_per_token(dtype);
    return footprint;
}

CapacityPlan plan_capacity(const ModelConfig& config, std::uint64_t text_weight_bytes, KvCacheDtype dtype,
                           const CapacityRequest& request) {
    MSA_CHECK(request.context_tokens > 0, "the context length must be positive, not {}", request.context_tokens);
    MSA_CHECK(request.context_tokens <= config.max_position_embeddings,
              "a context of {} tokens exceeds the model's max_position_embeddings ({})", request.context_tokens,
              config.max_position_embeddings);
    MSA_CHECK(request.gpu_memory_gib > 0 && std::isfinite(request.gpu_memory_gib),
              "the GPU memory must be a positive number of GiB, not {}", request.gpu_memory_gib);
    MSA_CHECK(request.memory_utilization > 0 && request.memory_utilization <= 1,
              "the GPU memory utilization must be in (0, 1], not {}", request.memory_utilization);
    CapacityPlan plan;
    plan.per_token = kv_footprint(config, dtype, request.tp);
    plan.usable_bytes =
        static_cast<std::uint64_t>(request.gpu_memory_gib * request.memory_utilization * 1024.0 * 1024.0 * 1024.0);
    plan.weight_bytes =
        (text_weight_bytes + static_cast<std::uint64_t>(request.tp) - 1) / static_cast<std::uint64_t>(request.tp);
    plan.cache_bytes = static_cast<std::int64_t>(plan.usable_bytes) - static_cast<std::int64_t>(plan.weight_bytes);
    plan.tokens_per_sequence = (request.context_tokens + kKvPageTokens - 1) / kKvPageTokens * kKvPageTokens;
    plan.bytes_per_sequence = static_cast<std::uint64_t>(plan.tokens_per_sequence) * plan.per_token.total();
    if (plan.cache_bytes > 0) {
        const auto cache = static_cast<std::uint64_t>(plan.cache_bytes);
        plan.max_sequences = static_cast<std::int64_t>(cache / plan.bytes_per_sequence);
        plan.max_cached_tokens = static_cast<std::int64_t>(cache / plan.per_token.total());
    }
    return plan;
}

}  // namespace msa
