#include "model/random_checkpoint.h"

#include "core/error.h"
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/safetensors_writer.h"
#include "formats/scalar_formats.h"
#include "model/checkpoint_weights.h"
#include "model/model_config.h"
#include "model/weight_names.h"

#include <cmath>
#include <fstream>
#include <random>

namespace msa {
namespace {

std::vector<float> uniform(std::size_t n, float amplitude, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-amplitude, amplitude);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

template <typename T>
std::span<const std::uint8_t> bytes_of(const std::vector<T>& v) {
    return {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(T)};
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
    std::vector<std::uint16_t> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
    return out;
}

void add_linear(SafetensorsWriter& w, const std::string& module, std::int64_t rows, std::int64_t cols,
                LinearFormat format, std::mt19937& rng) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto x = uniform(n, std::sqrt(3.0f / static_cast<float>(cols)), rng);
    switch (format) {
        case LinearFormat::f32: w.add(module + ".weight", DType::F32, {rows, cols}, bytes_of(x)); return;
        case LinearFormat::f16: {
            std::vector<std::uint16_t> h(n);
            for (std::size_t i = 0; i < n; ++i) h[i] = float_to_fp16(x[i]);
            w.add(module + ".weight", DType::F16, {rows, cols}, bytes_of(h));
            return;
        }
        case LinearFormat::bf16: w.add(module + ".weight", DType::BF16, {rows, cols}, bytes_of(to_bf16(x))); return;
        case LinearFormat::mxfp8: {
            MSA_CHECK(cols % 32 == 0, "an MXFP8 weight needs an input size divisible by 32 ({} has {})", module, cols);
            std::vector<std::uint8_t> values(n), scales(n / 32);
            for (std::int64_t r = 0; r < rows; ++r) {
                mxfp8_quantize(x.data() + r * cols, static_cast<std::size_t>(cols), values.data() + r * cols,
                               scales.data() + r * (cols / 32));
            }
            w.add(module + ".weight", DType::F8_E4M3, {rows, cols}, values);
            w.add(module + ".weight_scale_inv", DType::U8, {rows, cols / 32}, scales);
            return;
        }
        case LinearFormat::nvfp4: {
            MSA_CHECK(cols % 16 == 0, "an NVFP4 weight needs an input size divisible by 16 ({} has {})", module, cols);
            std::vector<std::uint8_t> packed(n / 2), scales(n / 16);
            const float global = nvfp4_quantize_weight(x.data(), n, packed.data(), scales.data());
            const std::vector<float> g = {global};
            w.add(module + ".weight", DType::U8, {rows, cols / 2}, packed);
            w.add(module + ".weight_scale", DType::F8_E4M3, {rows, cols / 16}, scales);
            w.add(module + ".weight_scale_2", DType::F32, {}, bytes_of(g));
            return;
        }
    }
}

}  // namespace

void write_random_checkpoint(const std::filesystem::path& dir, const RandomCheckpointSpec& spec) {
    const ModelConfig config = parse_model_config(spec.config_json, "config.json");
    std::filesystem::create_directories(dir);
    {
        std::ofstream out(dir / "config.json");
        out << spec.config_json;
        MSA_CHECK(out.good(), "cannot write {}", (dir / "config.json").string());
    }
    const WeightNames names(config.text_prefix.empty() ? WeightPrefixStyle::text_only
                                                       : WeightPrefixStyle::vision_language);
    std::mt19937 rng(spec.seed);
    SafetensorsWriter writer;
    for (const WeightSpec& s : model_weight_specs(config, names)) {
        if (s.linear) {
            LinearFormat f = LinearFormat::bf16;
            switch (s.group) {
                case WeightGroup::attention:
                case WeightGroup::indexer: f = spec.attention_format; break;
                case WeightGroup::dense_mlp:
                case WeightGroup::shared_expert: f = spec.mlp_format; break;
                case WeightGroup::routed_expert: f = spec.expert_format; break;
                default: break;  // lm_head stays BF16, as in the real checkpoints
            }
            add_linear(writer, s.name, s.shape[0], s.shape[1], f, rng);
            continue;
        }
        std::size_t n = 1;
        for (auto d : s.shape) n *= static_cast<std::size_t>(d);
        switch (s.group) {
            case WeightGroup::embedding:
                writer.add(s.name, DType::BF16, s.shape, bytes_of(to_bf16(uniform(n, 1.0f, rng))));
                break;
            case WeightGroup::router:
                if (s.shape.size() == 2) {
                    writer.add(s.name, DType::F32, s.shape, bytes_of(uniform(n, std::sqrt(3.0f / s.shape[1]), rng)));
                } else {
                    writer.add(s.name, DType::F32, s.shape, bytes_of(uniform(n, 0.05f, rng)));
                }
                break;
            default:  // norm weights (also the index norms, grouped under indexer)
                writer.add(s.name, DType::BF16, s.shape, bytes_of(to_bf16(uniform(n, 0.2f, rng))));
                break;
        }
    }
    writer.write_sharded(dir, spec.max_shard_bytes);
}

}  // namespace msa
