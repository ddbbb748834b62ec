#include "model/dspark_model.h"

#include "core/error.h"
#include "core/parallel.h"
#include "formats/convert.h"
#include "formats/message_text.h"
#include "kernels/cpu/ffn.h"
#include "kernels/cpu/gemm_nt.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax_pv.h"  // online_softmax_block: the vectorised exp of the attention kernels
#include "kernels/cpu/weight_dequant.h"
#include "model/checkpoint_weights.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/weight_names.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

namespace msa {
namespace {

using nlohmann::json;

// The swigluoai constants of the CPU kernel (kernels/cpu/swiglu.h); a drafter trained with others is refused.
constexpr double kSwigluAlpha = 1.702;
constexpr double kSwigluLimit = 7.0;

const json& require_field(const json& doc, const char* field, std::string_view source) {
    const auto it = doc.find(field);
    MSA_CHECK(it != doc.end(), "{}: field {} is missing", source, field);
    return *it;
}

int int_field(const json& doc, const char* field, std::string_view source, int min_value) {
    const json& v = require_field(doc, field, source);
    MSA_CHECK(v.is_number_integer(), "{}: field {} must be an integer, not {}", source, field, json_kind(v));
    const auto x = v.get<std::int64_t>();
    MSA_CHECK(x >= min_value && x <= std::numeric_limits<int>::max(), "{}: field {} = {} must be at least {}", source,
              field, x, min_value);
    return static_cast<int>(x);
}

double number_field(const json& doc, const char* field, std::string_view source) {
    const json& v = require_field(doc, field, source);
    MSA_CHECK(v.is_number(), "{}: field {} must be a number, not {}", source, field, json_kind(v));
    const double x = v.get<double>();
    MSA_CHECK(std::isfinite(x), "{}: field {} must be finite", source, field);
    return x;
}

// An optional field that, when present, must hold `expected` (a feature this implementation has exactly one form of).
template <typename T>
void expect_field(const json& doc, const char* field, const T& expected, std::string_view source,
                  std::string_view what) {
    const auto it = doc.find(field);
    if (it == doc.end()) return;
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>) {
        ok = it->is_boolean() && it->get<bool>() == expected;
    } else if constexpr (std::is_arithmetic_v<T>) {
        ok = it->is_number() && std::abs(it->get<double>() - static_cast<double>(expected)) <= 1e-9;
    } else {
        ok = it->is_string() && it->get<std::string>() == expected;
    }
    MSA_CHECK(ok, "{}: field {} = {} is not supported ({})", source, field, it->dump(), what);
}

std::vector<float> norm_vector(const Checkpoint& checkpoint, const std::string& name, std::int64_t dim) {
    const TensorView& t = checkpoint.get(name);
    MSA_CHECK(t.rank() == 1 && t.shape[0] == dim, "{} must have shape [{}]", t.describe(), dim);
    std::vector<float> out(static_cast<std::size_t>(dim));
    switch (t.dtype) {
        case DType::BF16:
            bf16_to_float(t.as<std::uint16_t>().data(), out.data(), out.size());
            break;
        case DType::F16:
            fp16_to_float(t.as<std::uint16_t>().data(), out.data(), out.size());
            break;
        case DType::F32:
            std::copy_n(t.as<float>().data(), out.size(), out.data());
            break;
        default:
            fail("{} must be BF16, F16 or F32", t.describe());
    }
    return out;
}

WeightView linear_view(const Checkpoint& checkpoint, const std::string& module, std::int64_t out, std::int64_t in) {
    WeightView v = linear_weight_view(bind_linear(checkpoint, module, out, in));
    cpu::check_linear_weight(v, module.c_str());
    return v;
}

std::string strip_weight_suffix(const std::string& name) {
    MSA_CHECK(name.size() > kWeightSuffix.size() && name.ends_with(kWeightSuffix), "tensor name {} has no {}", name,
              kWeightSuffix);
    return name.substr(0, name.size() - kWeightSuffix.size());
}

std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot read {}", path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// [rows][heads][dim] -> head-major rows: row i of head h at out[(h * head_stride + i) * dim].
void to_head_major(const float* x, std::int64_t rows, int heads, int dim, float* out, std::int64_t head_stride) {
    for (std::int64_t i = 0; i < rows; ++i) {
        for (int h = 0; h < heads; ++h) {
            std::copy_n(x + (i * heads + h) * dim, dim, out + (h * head_stride + i) * dim);
        }
    }
}

// [rows][heads][dim] -> transposed per head: row i of head h, dim d at out[(h * dim + d) * row_stride + i].
void to_transposed(const float* x, std::int64_t rows, int heads, int dim, float* out, std::int64_t row_stride) {
    for (std::int64_t i = 0; i < rows; ++i) {
        for (int h = 0; h < heads; ++h) {
            const float* src = x + (i * heads + h) * dim;
            for (int d = 0; d < dim; ++d) out[(std::int64_t{h} * dim + d) * row_stride + i] = src[d];
        }
    }
}

void add_rows(float* a, const float* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

}  // namespace

DSparkConfig parse_dspark_config(std::string_view json_text, std::string_view source) {
    json doc;
    try {
        doc = json::parse(json_text);
    } catch (const json::exception& e) {
        fail("{}: not valid JSON ({})", source, e.what());
    }
    MSA_CHECK(doc.is_object(), "{}: the config must be a JSON object", source);
    expect_field(doc, "model_type", std::string("dspark"), source, "a DSpark drafter config has model_type \"dspark\"");
    DSparkConfig c;
    c.hidden_size = int_field(doc, "hidden_size", source, 1);
    c.num_hidden_layers = int_field(doc, "num_hidden_layers", source, 1);
    c.num_attention_heads = int_field(doc, "num_attention_heads", source, 1);
    c.num_key_value_heads = int_field(doc, "num_key_value_heads", source, 1);
    c.head_dim = int_field(doc, "head_dim", source, 2);
    c.rotary_dim = int_field(doc, "rotary_dim", source, 2);
    c.rope_theta = number_field(doc, "rope_theta", source);
    c.rms_norm_eps = number_field(doc, "rms_norm_eps", source);
    c.intermediate_size = int_field(doc, "intermediate_size", source, 1);
    c.vocab_size = int_field(doc, "vocab_size", source, 1);
    c.block_size = int_field(doc, "dspark_block_size", source, 1);
    c.mask_token_id = int_field(doc, "mask_token_id", source, 0);
    c.sliding_window = int_field(doc, "sliding_window", source, 1);
    MSA_CHECK(c.num_attention_heads % c.num_key_value_heads == 0,
              "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source, c.num_attention_heads,
              c.num_key_value_heads);
    MSA_CHECK(c.rotary_dim % 2 == 0 && c.rotary_dim <= c.head_dim,
              "{}: rotary_dim {} must be even and at most head_dim {}", source, c.rotary_dim, c.head_dim);
    MSA_CHECK(c.rope_theta > 0 && c.rms_norm_eps > 0, "{}: rope_theta and rms_norm_eps must be positive", source);
    MSA_CHECK(c.block_size <= 4096, "{}: dspark_block_size {} is implausibly large", source, c.block_size);
    MSA_CHECK(c.mask_token_id < c.vocab_size, "{}: mask_token_id {} is outside the vocabulary of {} tokens", source,
              c.mask_token_id, c.vocab_size);

    const json& ids = require_field(doc, "target_layer_ids", source);
    MSA_CHECK(ids.is_array() && !ids.empty(), "{}: field target_layer_ids must be a non-empty array", source);
    std::set<int> seen;
    for (const json& id : ids) {
        MSA_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < 1 << 20,
                  "{}: target_layer_ids holds {}, not a layer index", source, id.dump());
        const int layer = id.get<int>();
        MSA_CHECK(seen.insert(layer).second, "{}: target_layer_ids lists layer {} twice", source, layer);
        c.target_layer_ids.push_back(layer);
    }

    const json& markov = require_field(doc, "markov_head", source);
    MSA_CHECK(markov.is_object(), "{}: field markov_head must be an object", source);
    expect_field(markov, "type", std::string("vanilla"), source, "only the vanilla Markov head exists");
    c.markov_rank = int_field(markov, "rank", source, 1);

    expect_field(doc, "use_gemma_norm", true, source, "only Gemma RMSNorm exists");
    expect_field(doc, "use_qk_norm", true, source, "the drafter always has per-head q/k norms");
    expect_field(doc, "qk_norm_type", std::string("per_head"), source, "only per-head q/k norms exist");
    expect_field(doc, "hidden_act", std::string("swigluoai"), source, "only swigluoai exists");
    expect_field(doc, "swiglu_alpha", kSwigluAlpha, source, "the CPU kernels implement alpha 1.702");
    expect_field(doc, "swiglu_limit", kSwigluLimit, source, "the CPU kernels implement limit 7");
    expect_field(doc, "causal", false, source, "DSpark blocks attend bidirectionally");
    expect_field(doc, "shares_target_embeddings", true, source, "the drafter must share the target's embeddings");
    expect_field(doc, "shares_target_lm_head", true, source, "the drafter must share the target's lm_head");
    if (const auto it = doc.find("target_model"); it != doc.end()) {
        MSA_CHECK(it->is_string() && !it->get<std::string>().empty(), "{}: field target_model must be a path", source);
        c.target_model = it->get<std::string>();
    }
    return c;
}

std::unique_ptr<DSparkModel> DSparkModel::load(const std::string& drafter_dir, const DSparkLoadOptions& options) {
    namespace fs = std::filesystem;
    const fs::path dir(drafter_dir);
    MSA_CHECK(fs::is_directory(dir), "DSpark drafter directory {} does not exist", drafter_dir);
    const fs::path config_path = dir / "config.json";
    MSA_CHECK(fs::exists(config_path),
              "{} is missing (a DSpark drafter directory holds config.json and "
              "model.safetensors)",
              config_path.string());
    std::unique_ptr<DSparkModel> m(new DSparkModel());
    m->config_ = parse_dspark_config(read_text_file(config_path), config_path.string());
    if (options.sliding_window > 0) m->config_.sliding_window = options.sliding_window;
    const DSparkConfig& c = m->config_;

    // The target's shared tensors.
    const fs::path target_dir = options.target_dir.empty() ? dir / c.target_model : fs::path(options.target_dir);
    MSA_CHECK(fs::is_directory(target_dir), "the DSpark drafter's target model directory {} does not exist",
              target_dir.string());
    const ModelConfig target = load_model_config(target_dir.string());
    MSA_CHECK(target.hidden_size == c.hidden_size && target.vocab_size == c.vocab_size,
              "DSpark drafter {} (hidden {}, vocabulary {}) does not fit the target {} (hidden {}, vocabulary {})",
              drafter_dir, c.hidden_size, c.vocab_size, target_dir.string(), target.hidden_size, target.vocab_size);
    for (const int layer : c.target_layer_ids) {
        MSA_CHECK(layer < target.num_hidden_layers,
                  "DSpark drafter {}: target layer {} does not exist (the target has {})", drafter_dir, layer,
                  target.num_hidden_layers);
    }
    m->target_ = std::make_unique<Checkpoint>(Checkpoint::open(target_dir.string()));
    std::vector<std::string_view> names;
    for (const TensorView* t : m->target_->tensors()) names.push_back(t->name);
    const WeightNames target_names = WeightNames::detect(names);
    const std::int64_t V = c.vocab_size, H = c.hidden_size;
    m->embed_tokens_ = linear_view(*m->target_, strip_weight_suffix(target_names.embed_tokens()), V, H);
    m->lm_head_ = target.tie_word_embeddings
                      ? m->embed_tokens_
                      : linear_view(*m->target_, strip_weight_suffix(target_names.lm_head()), V, H);

    // The drafter's own tensors (names of drafter.py's state_dict).
    m->drafter_ = std::make_unique<Checkpoint>(Checkpoint::open(drafter_dir));
    const Checkpoint& d = *m->drafter_;
    m->fc_ = linear_view(d, "fc", H, c.tap_width());
    m->hidden_norm_ = norm_vector(d, "hidden_norm.weight", H);
    m->final_norm_ = norm_vector(d, "norm.weight", H);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        Layer L;
        L.input_layernorm = norm_vector(d, p + "input_layernorm.weight", H);
        L.post_attention_layernorm = norm_vector(d, p + "post_attention_layernorm.weight", H);
        L.q_norm = norm_vector(d, p + "self_attn.q_norm.weight", c.head_dim);
        L.k_norm = norm_vector(d, p + "self_attn.k_norm.weight", c.head_dim);
        L.q_proj = linear_view(d, p + "self_attn.q_proj", c.q_dim(), H);
        L.k_proj = linear_view(d, p + "self_attn.k_proj", c.kv_dim(), H);
        L.v_proj = linear_view(d, p + "self_attn.v_proj", c.kv_dim(), H);
        L.o_proj = linear_view(d, p + "self_attn.o_proj", H, c.q_dim());
        L.gate_proj = linear_view(d, p + "mlp.gate_proj", c.intermediate_size, H);
        L.up_proj = linear_view(d, p + "mlp.up_proj", c.intermediate_size, H);
        L.down_proj = linear_view(d, p + "mlp.down_proj", H, c.intermediate_size);
        m->layers_.push_back(std::move(L));
    }
    MSA_CHECK(d.find("layers." + std::to_string(c.num_hidden_layers) + ".input_layernorm.weight") == nullptr,
              "DSpark drafter {} holds more layers than num_hidden_layers = {}", drafter_dir, c.num_hidden_layers);
    m->markov_w1_ = linear_view(d, "markov_head.w1", V, c.markov_rank);
    m->markov_w2_ = linear_view(d, "markov_head.w2", V, c.markov_rank);
    return m;
}

void DSparkModel::context_kv(const float* taps, std::int64_t count, std::int32_t first_position,
                             std::span<float* const> k_out, std::span<float* const> vt_out,
                             std::int64_t head_stride) const {
    const DSparkConfig& c = config_;
    MSA_CHECK(k_out.size() == layers_.size() && vt_out.size() == layers_.size(),
              "context_kv needs one K and one V output per drafter layer");
    MSA_CHECK(head_stride >= count, "context_kv: head stride {} is smaller than the {} rows", head_stride, count);
    if (count <= 0) return;
    MSA_CHECK(first_position >= 0 && first_position <= std::numeric_limits<std::int32_t>::max() - count,
              "context position {} is out of range", first_position);
    const auto H = static_cast<std::size_t>(c.hidden_size);
    std::vector<float> ctx(static_cast<std::size_t>(count) * H);
    cpu::linear(fc_, taps, count, ctx.data(), ActivationMode::exact);
    const float eps = static_cast<float>(c.rms_norm_eps);
    cpu::gemma_rms_norm(ctx.data(), hidden_norm_.data(), count, c.hidden_size, eps, ctx.data());
    std::vector<std::int32_t> positions(static_cast<std::size_t>(count));
    std::iota(positions.begin(), positions.end(), first_position);
    const cpu::RopeTables rope = cpu::rope_tables(positions.data(), count, c.rotary_dim, c.rope_theta);
    const auto kv = static_cast<std::size_t>(c.kv_dim());
    std::vector<float> k(static_cast<std::size_t>(count) * kv), v(k.size());
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        const cpu::LinearTask tasks[] = {{&L.k_proj, ctx.data(), nullptr, count, k.data(), ActivationMode::exact},
                                         {&L.v_proj, ctx.data(), nullptr, count, v.data(), ActivationMode::exact}};
        cpu::linear_many(tasks);
        cpu::gemma_rms_norm(k.data(), L.k_norm.data(), count * c.num_key_value_heads, c.head_dim, eps, k.data());
        cpu::apply_rope(k.data(), count, c.num_key_value_heads, c.head_dim, rope);
        to_head_major(k.data(), count, c.num_key_value_heads, c.head_dim, k_out[l], head_stride);
        to_transposed(v.data(), count, c.num_key_value_heads, c.head_dim, vt_out[l], head_stride);
    }
}

// One drafter attention block: x [B][hidden] (normed) -> out [B][hidden] (after o_proj).
void DSparkModel::attention(const Layer& L, const float* x, std::int32_t n, const DSparkLayerContext& lc,
                            const DSparkContext& context, float* out) const {
    const DSparkConfig& c = config_;
    const int B = c.block_size, Hq = c.num_attention_heads, D = c.head_dim;
    const auto kv = static_cast<std::size_t>(c.kv_dim());
    const int gqa = c.num_attention_heads / c.num_key_value_heads;
    const float eps = static_cast<float>(c.rms_norm_eps);
    std::vector<float> q(static_cast<std::size_t>(B) * Hq * D), k(B * kv), v(B * kv);
    const cpu::LinearTask tasks[] = {{&L.q_proj, x, nullptr, B, q.data(), ActivationMode::exact},
                                     {&L.k_proj, x, nullptr, B, k.data(), ActivationMode::exact},
                                     {&L.v_proj, x, nullptr, B, v.data(), ActivationMode::exact}};
    cpu::linear_many(tasks);
    cpu::gemma_rms_norm(q.data(), L.q_norm.data(), std::int64_t{B} * Hq, D, eps, q.data());
    cpu::gemma_rms_norm(k.data(), L.k_norm.data(), std::int64_t{B} * c.num_key_value_heads, D, eps, k.data());
    std::vector<std::int32_t> positions(static_cast<std::size_t>(B));
    std::iota(positions.begin(), positions.end(), n);
    const cpu::RopeTables rope = cpu::rope_tables(positions.data(), B, c.rotary_dim, c.rope_theta);
    cpu::apply_rope(q.data(), B, Hq, D, rope);
    cpu::apply_rope(k.data(), B, c.num_key_value_heads, D, rope);

    // Block keys/values laid out like the context's.
    std::vector<float> kb(k.size()), vbt(v.size());
    to_head_major(k.data(), B, c.num_key_value_heads, D, kb.data(), B);
    to_transposed(v.data(), B, c.num_key_value_heads, D, vbt.data(), B);

    // Context rows visible to this block: positions [n - window, n - 1] that the context holds.
    const std::int64_t lo_pos = std::max<std::int64_t>(std::int64_t{n} - c.sliding_window, context.first_position);
    const std::int64_t hi_pos = std::min<std::int64_t>(n, context.first_position + context.count);
    const std::int64_t lo = std::max<std::int64_t>(lo_pos - context.first_position, 0);
    const std::int64_t nc = std::max<std::int64_t>(hi_pos - context.first_position - lo, 0);
    const std::int64_t width = nc + B;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    const std::int64_t hs = context.head_stride;
    std::vector<float> attn(static_cast<std::size_t>(B) * Hq * D, 0.0f);
    // Per query head: scores S = Q K^T over [context | block], masked softmax, out = P_ctx V_ctx + P_blk V_blk.
    parallel_for(static_cast<std::size_t>(Hq), 1, [&](std::size_t h0, std::size_t h1) {
        std::vector<float> s(static_cast<std::size_t>(B * width)), p(s.size()), o(static_cast<std::size_t>(B) * D),
            ob(o.size());
        for (std::size_t h = h0; h < h1; ++h) {
            const auto g = static_cast<std::int64_t>(h) / gqa;
            const float* qh = q.data() + h * D;
            const std::int64_t ldq = std::int64_t{Hq} * D;
            if (nc > 0) cpu::gemm_nt_f32(qh, ldq, lc.k + (g * hs + lo) * D, D, s.data(), width, B, nc, D);
            cpu::gemm_nt_f32(qh, ldq, kb.data() + g * B * D, D, s.data() + nc, width, B, B, D);
            std::vector<float> inv(static_cast<std::size_t>(B));
            for (int b = 0; b < B; ++b) {
                float* row = s.data() + b * width;
                for (std::int64_t j = 0; j < nc; ++j) {
                    if (context.valid[lo + j] == 0) row[j] = kMasked;
                }
                float m = kMasked, l = 0.0f;
                cpu::online_softmax_block(row, static_cast<int>(width), scale, m, l, p.data() + b * width);
                inv[b] = 1.0f / l;
            }
            if (nc > 0) cpu::gemm_nt_f32(p.data(), width, lc.vt + g * D * hs + lo, hs, o.data(), D, B, D, nc);
            cpu::gemm_nt_f32(p.data() + nc, width, vbt.data() + g * D * B, B, ob.data(), D, B, D, B);
            for (int b = 0; b < B; ++b) {
                float* dst = attn.data() + (static_cast<std::size_t>(b) * Hq + h) * D;
                for (int d = 0; d < D; ++d) dst[d] = ((nc > 0 ? o[b * D + d] : 0.0f) + ob[b * D + d]) * inv[b];
            }
        }
    });
    cpu::linear(L.o_proj, attn.data(), B, out, ActivationMode::exact);
}

void DSparkModel::block_logits(std::int32_t anchor_token, std::int32_t n, const DSparkContext& context, int rows,
                               float* u) const {
    const DSparkConfig& c = config_;
    const int B = c.block_size;
    MSA_CHECK(rows >= 1 && rows <= B, "a DSpark block has {} rows, {} were asked for", B, rows);
    MSA_CHECK(anchor_token >= 0 && anchor_token < c.vocab_size, "anchor token {} is outside the vocabulary of {}",
              anchor_token, c.vocab_size);
    MSA_CHECK(n >= 0 && n <= std::numeric_limits<std::int32_t>::max() - B, "anchor position {} is out of range", n);
    MSA_CHECK(context.layers.size() == layers_.size(), "the DSpark context has {} layers, the drafter {}",
              context.layers.size(), layers_.size());
    MSA_CHECK(context.count == 0 || (context.valid != nullptr && context.head_stride >= context.count),
              "the DSpark context has {} rows but no validity flags or a head stride of {}", context.count,
              context.head_stride);
    const auto H = static_cast<std::size_t>(c.hidden_size);
    const float eps = static_cast<float>(c.rms_norm_eps);
    std::vector<float> h(B * H), x(B * H), y(B * H);
    cpu::weight_row(embed_tokens_, anchor_token, h.data());
    for (int j = 1; j < B; ++j) cpu::weight_row(embed_tokens_, c.mask_token_id, h.data() + j * H);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        cpu::gemma_rms_norm(h.data(), L.input_layernorm.data(), B, c.hidden_size, eps, x.data());
        attention(L, x.data(), n, context.layers[l], context, y.data());
        add_rows(h.data(), y.data(), h.size());
        cpu::gemma_rms_norm(h.data(), L.post_attention_layernorm.data(), B, c.hidden_size, eps, x.data());
        cpu::expert_forward({L.gate_proj, L.up_proj, L.down_proj}, x.data(), B, y.data(), ActivationMode::exact);
        add_rows(h.data(), y.data(), h.size());
    }
    cpu::gemma_rms_norm(h.data(), final_norm_.data(), rows, c.hidden_size, eps, x.data());
    cpu::linear(lm_head_, x.data(), rows, u, ActivationMode::exact);
}

void DSparkModel::add_markov(std::int32_t prev_token, float* logits) const {
    MSA_CHECK(prev_token >= 0 && prev_token < config_.vocab_size, "token {} is outside the vocabulary of {}",
              prev_token, config_.vocab_size);
    std::vector<float> code(static_cast<std::size_t>(config_.markov_rank));
    std::vector<float> term(static_cast<std::size_t>(config_.vocab_size));
    cpu::weight_row(markov_w1_, prev_token, code.data());
    cpu::linear(markov_w2_, code.data(), 1, term.data(), ActivationMode::exact);
    add_rows(logits, term.data(), term.size());
}

void DSparkModel::greedy_drafts(const float* u, std::int32_t anchor_token, int num_drafts,
                                std::vector<std::int32_t>& drafts, float* logits) const {
    const auto V = static_cast<std::size_t>(config_.vocab_size);
    MSA_CHECK(num_drafts >= 0 && num_drafts <= config_.block_size, "a DSpark block drafts at most {} tokens, not {}",
              config_.block_size, num_drafts);
    drafts.clear();
    std::vector<float> row(V);
    std::int32_t x = anchor_token;
    for (int j = 0; j < num_drafts; ++j) {
        std::copy_n(u + j * V, V, row.data());
        add_markov(x, row.data());
        x = static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());  // first maximum
        drafts.push_back(x);
        if (logits != nullptr) std::copy(row.begin(), row.end(), logits + j * V);
    }
}

}  // namespace msa
