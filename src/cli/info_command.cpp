// `msa info MODEL_DIR`: what a user wants to know before serving a model: its shape, which layers are dense or
// MSA attention and dense or MoE FFN, parameters and bytes by storage format, KV-cache bytes per token for each
// KV dtype, and how many sequences of a given context fit in a given GPU memory.
//
// Weights are counted from the safetensors headers when the files are present; with only config.json (and
// perhaps model.safetensors.index.json) they are estimated from the config, and the output says so.
#include "cli/commands.h"
#include "core/error.h"
#include "formats/safetensors_reader.h"
#include "model/checkpoint_weights.h"
#include "model/model_config.h"
#include "model/model_summary.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace msa::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::int64_t kDefaultContext = 131072;

struct InfoOptions {
    std::string model_dir;
    CapacityRequest capacity;
    bool json_output = false;
};

// ---- gathering ----------------------------------------------------------------------------------------------

struct IndexOnly {
    std::string path;
    std::size_t tensors = 0;
    std::size_t vision_tensors = 0;
    std::size_t shards = 0;
};

struct ModelFacts {
    std::string dir;
    std::string config_path;
    ModelConfig config;
    WeightSummary weights;
    std::optional<std::uint64_t> index_total_size;
    std::optional<IndexOnly> index_only;  // an index whose shards are all absent
};

bool any_safetensors_file(const fs::path& dir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.path().extension() == ".safetensors") {
            return true;
        }
    }
    return false;
}

// With an index but no shard: check that the index names every tensor the config calls for.
void check_index_against_config(const SafetensorsIndex& index, const std::string& index_path,
                                const ModelConfig& config) {
    std::vector<std::string_view> names;
    for (const auto& [name, shard] : index.weight_map) {
        names.push_back(name);
    }
    for (const auto& spec : model_weight_specs(config, WeightNames::detect(names))) {
        const std::string name = spec.linear ? spec.name + std::string(kWeightSuffix) : spec.name;
        MSA_CHECK(index.weight_map.count(name) != 0 ||
                      (!spec.alternative_name.empty() && index.weight_map.count(spec.alternative_name) != 0),
                  "{}: tensor \"{}\", which config.json calls for, is not listed", index_path, name);
    }
}

ModelFacts gather(const InfoOptions& options) {
    ModelFacts facts;
    std::error_code ec;
    fs::path dir(options.model_dir);
    fs::path config_path = dir / "config.json";
    if (fs::is_regular_file(dir, ec)) {  // a config.json given directly
        config_path = dir;
        dir = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
    } else {
        MSA_CHECK(fs::is_directory(dir, ec), "{}: no such model directory", options.model_dir);
    }
    facts.dir = dir.string();
    facts.config_path = config_path.string();
    facts.config = load_model_config(facts.config_path);

    const fs::path index_path = dir / kSafetensorsIndexFile;
    if (fs::exists(index_path, ec)) {
        const SafetensorsIndex index = read_safetensors_index(index_path.string());
        facts.index_total_size = index.total_size;
        bool any_shard = false;
        for (const auto& shard : index.shards) {
            any_shard = any_shard || fs::exists(dir / shard, ec);
        }
        if (!any_shard) {
            check_index_against_config(index, index_path.string(), facts.config);
            IndexOnly only{index_path.string(), index.weight_map.size(), 0, index.shards.size()};
            for (const auto& [name, shard] : index.weight_map) {
                only.vision_tensors += is_vision_tensor(name) ? 1 : 0;
            }
            facts.index_only = only;
            facts.weights = estimate_weights(facts.config);
            return facts;
        }
    } else if (!any_safetensors_file(dir)) {
        facts.weights = estimate_weights(facts.config);
        return facts;
    }
    const Checkpoint checkpoint = Checkpoint::open(dir.string());
    const CheckpointWeights weights = bind_checkpoint_weights(facts.config, checkpoint);
    facts.weights = summarize_weights(facts.config, weights, checkpoint);
    return facts;
}

// ---- formatting helpers ---------------------------------------------------------------------------------------

std::string digits(std::uint64_t value) {
    std::string plain = std::to_string(value);
    std::string out;
    for (std::size_t i = 0; i < plain.size(); ++i) {
        if (i > 0 && (plain.size() - i) % 3 == 0) {
            out += ',';
        }
        out += plain[i];
    }
    return out;
}

std::string gib(std::uint64_t bytes) {
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

// Bytes in the largest binary unit that keeps the number >= 1 (B, KiB, MiB, GiB).
std::string bytes_text(std::uint64_t bytes) {
    if (bytes >= (1ull << 30)) {
        return gib(bytes);
    }
    if (bytes >= (1ull << 20)) {
        return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1ull << 20));
    }
    if (bytes >= (1ull << 10)) {
        return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / (1ull << 10));
    }
    return fmt::format("{} B", bytes);
}

std::string param_text(std::uint64_t params) {
    if (params >= 1'000'000'000) {
        return fmt::format("{:.2f} B", params / 1e9);
    }
    if (params >= 1'000'000) {
        return fmt::format("{:.2f} M", params / 1e6);
    }
    return digits(params);
}

// "0-2, 5, 7-59" for the layers where `pick` holds; "none" when empty.
template <typename Pick>
std::string layer_ranges(int layers, Pick pick) {
    std::string out;
    for (int i = 0; i < layers;) {
        if (!pick(i)) {
            ++i;
            continue;
        }
        int j = i;
        while (j + 1 < layers && pick(j + 1)) {
            ++j;
        }
        out += out.empty() ? "" : ", ";
        out += i == j ? std::to_string(i) : fmt::format("{}-{}", i, j);
        i = j + 1;
    }
    return out.empty() ? "none" : out;
}

template <typename Pick>
int layer_count(int layers, Pick pick) {
    int n = 0;
    for (int i = 0; i < layers; ++i) {
        n += pick(i) ? 1 : 0;
    }
    return n;
}

struct LayerKinds {
    std::function<bool(int)> dense_attention, msa, dense_mlp, moe;
};

LayerKinds layer_kinds(const ModelConfig& c) {
    return {[&c](int l) { return !c.is_msa_layer(l); }, [&c](int l) { return c.is_msa_layer(l); },
            [&c](int l) { return !c.is_moe_layer(l); }, [&c](int l) { return c.is_moe_layer(l); }};
}

std::vector<CapacityPlan> capacity_plans(const ModelFacts& facts, const CapacityRequest& request) {
    std::vector<CapacityPlan> plans;
    for (KvCacheDtype dtype : kAllKvCacheDtypes) {
        plans.push_back(plan_capacity(facts.config, facts.weights.total.bytes, dtype, request));
    }
    return plans;
}

// ---- text output ----------------------------------------------------------------------------------------------

void print_text(const ModelFacts& facts, const InfoOptions& options) {
    const ModelConfig& c = facts.config;
    const WeightSummary& w = facts.weights;
    std::string out;
    auto line = [&out](const std::string& text) { out += text + "\n"; };

    line(fmt::format("Model {}", facts.dir));
    line(fmt::format("  config          {} ({})", facts.config_path,
                     c.text_prefix.empty() ? "flat text-only config" : "VL wrapper, text model under text_config"));
    if (!c.architectures.empty() || !c.model_type.empty()) {
        line(fmt::format("  architecture    {}{}", c.architectures.empty() ? "" : c.architectures.front(),
                         c.model_type.empty() ? "" : fmt::format(" (model_type {})", c.model_type)));
    }
    line(fmt::format("  hidden size     {}, vocabulary {} ({} lm_head), max context {}", c.hidden_size,
                     digits(static_cast<std::uint64_t>(c.vocab_size)), c.tie_word_embeddings ? "tied" : "untied",
                     digits(static_cast<std::uint64_t>(c.max_position_embeddings))));
    line(fmt::format("  attention       {} query heads, {} KV heads x {} (GQA {}), RoPE on {} of {} dims, theta {}",
                     c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.gqa_ratio(), c.rotary_dim, c.head_dim,
                     c.rope_theta));
    if (c.sparse.use_sparse_attention) {
        line(fmt::format("  MSA             top-{} of {}-token blocks, {} index heads x {}, score {}",
                         c.sparse.topk_blocks, c.sparse.block_size, c.sparse.num_index_heads, c.sparse.index_dim,
                         c.sparse.score_type));
    } else {
        line("  MSA             off (every layer dense attention)");
    }
    if (c.num_moe_layers() > 0) {
        line(fmt::format(
            "  MoE             {} experts x {}, top-{}, {} routing{}, scale {}{}", c.num_local_experts,
            c.intermediate_size, c.num_experts_per_tok, c.scoring_func,
            c.use_routing_bias ? " with correction bias" : "", c.routed_scaling_factor,
            c.n_shared_experts == 1 ? fmt::format(", + 1 shared expert x {}", c.shared_intermediate_size) : ""));
    }
    if (c.num_moe_layers() < c.num_hidden_layers) {
        line(fmt::format("  dense MLP       {} ({})", c.dense_intermediate_size, c.hidden_act));
    }
    if (c.quantization.present) {
        line(fmt::format("  quantization    {}{}{}",
                         c.quantization.quant_method.empty() ? "(no quant_method)" : c.quantization.quant_method,
                         c.quantization.moe_activation_nvfp4_row_scaled ? ", W4A4 experts (nvfp4_row_scaled)" : "",
                         c.quantization.kv_cache_quant_algo
                             ? fmt::format(", KV cache {}", kv_cache_dtype_name(*c.quantization.kv_cache_quant_algo))
                             : ""));
    }

    const LayerKinds kinds = layer_kinds(c);
    const int n = c.num_hidden_layers;
    line("");
    line(fmt::format("Layers: {}", n));
    line(fmt::format("  dense attention {:>3}  {}", layer_count(n, kinds.dense_attention),
                     layer_ranges(n, kinds.dense_attention)));
    line(fmt::format("  MSA attention   {:>3}  {}", layer_count(n, kinds.msa), layer_ranges(n, kinds.msa)));
    line(fmt::format("  dense MLP       {:>3}  {}", layer_count(n, kinds.dense_mlp), layer_ranges(n, kinds.dense_mlp)));
    line(fmt::format("  MoE             {:>3}  {}", layer_count(n, kinds.moe), layer_ranges(n, kinds.moe)));

    line("");
    if (w.from_headers) {
        line("Weights (from the safetensors headers)");
    } else if (facts.index_only) {
        line(fmt::format("Weights (estimated from config.json: {} lists {} tensors in {} shard(s), none present)",
                         kSafetensorsIndexFile, digits(facts.index_only->tensors), facts.index_only->shards));
    } else {
        line("Weights (estimated from config.json: no weight files present)");
    }
    for (const auto& note : w.notes) {
        line("  note: " + note);
    }
    line(fmt::format("  {:<16}{:>12}{:>14}", "format", "parameters", "bytes"));
    for (const auto& [format, count] : w.by_format) {
        line(fmt::format("  {:<16}{:>12}{:>14}", weight_format_name(format), param_text(count.params),
                         bytes_text(count.bytes)));
    }
    line(fmt::format("  {:<16}{:>12}{:>14}   ({} bytes)", "total", param_text(w.total.params),
                     bytes_text(w.total.bytes), digits(w.total.bytes)));
    line(fmt::format("  active per token {} ({} without embedding and lm_head)", param_text(w.active_params),
                     param_text(w.active_params - w.embedding_params)));
    line(fmt::format("  {:<16}{:>12}{:>14}", "by part", "parameters", "bytes"));
    for (const auto& [group, count] : w.by_group) {
        line(fmt::format("  {:<16}{:>12}{:>14}", weight_group_name(group), param_text(count.params),
                         bytes_text(count.bytes)));
    }
    if (w.from_headers) {
        line(fmt::format("  {:<16}{:>12}{:>14}", "stored dtype", "tensors", "bytes"));
        for (const auto& [dtype, count] : w.by_dtype) {
            line(fmt::format("  {:<16}{:>12}{:>14}", dtype, digits(count.tensors), bytes_text(count.bytes)));
        }
        if (w.vision.tensors > 0) {
            line(fmt::format("  skipped: {} vision tensors ({})", digits(w.vision.tensors), gib(w.vision.bytes)));
        }
        if (w.unused.tensors > 0) {
            line(fmt::format("  not used: {} other tensors ({})", digits(w.unused.tensors), gib(w.unused.bytes)));
        }
    } else if (facts.index_only && facts.index_only->vision_tensors > 0) {
        line(fmt::format("  skipped: {} vision tensors listed in the index", digits(facts.index_only->vision_tensors)));
    }
    if (facts.index_total_size) {
        line(fmt::format("  index metadata.total_size {} ({})", digits(*facts.index_total_size),
                         gib(*facts.index_total_size)));
    }

    line("");
    line(fmt::format("KV cache per token (all {} layers, one copy; default dtype {})", n,
                     kv_cache_dtype_name(c.default_kv_cache_dtype())));
    line(fmt::format("  {:<8}{:>14}{:>14}{:>14}", "dtype", "K+V", "index K", "total"));
    for (KvCacheDtype dtype : kAllKvCacheDtypes) {
        const KvFootprint f = kv_footprint(c, dtype, 1);
        line(fmt::format("  {:<8}{:>12} B{:>12} B{:>12} B", kv_cache_dtype_name(dtype), digits(f.kv_bytes),
                         digits(f.index_bytes), digits(f.total())));
    }

    const CapacityRequest& r = options.capacity;
    const auto plans = capacity_plans(facts, r);
    line("");
    line(fmt::format("Capacity: context {} tokens, TP {} x {} GiB GPU, {:.0f}% usable", digits(r.context_tokens), r.tp,
                     r.gpu_memory_gib, r.memory_utilization * 100));
    line(fmt::format("  per GPU: usable {}, text weights {}, left for the KV cache {}", gib(plans[0].usable_bytes),
                     gib(plans[0].weight_bytes),
                     plans[0].cache_bytes < 0 ? "none (the weights do not fit)"
                                              : gib(static_cast<std::uint64_t>(plans[0].cache_bytes))));
    line(fmt::format("  {:<8}{:>16}{:>16}{:>12}{:>16}", "dtype", "B/token/GPU", "per sequence", "sequences",
                     "cached tokens"));
    for (const auto& plan : plans) {
        line(fmt::format("  {:<8}{:>16}{:>16}{:>12}{:>16}", kv_cache_dtype_name(plan.per_token.dtype),
                         digits(plan.per_token.total()), gib(plan.bytes_per_sequence), digits(plan.max_sequences),
                         digits(plan.max_cached_tokens)));
    }
    std::fputs(out.c_str(), stdout);
}

// ---- JSON output ----------------------------------------------------------------------------------------------

json count_json(const ParamCount& count) {
    return {{"tensors", count.tensors}, {"params", count.params}, {"bytes", count.bytes}};
}

template <typename Key, typename Name>
json count_map_json(const std::map<Key, ParamCount>& counts, Name name) {
    json out = json::object();
    for (const auto& [key, count] : counts) {
        out[std::string(name(key))] = count_json(count);
    }
    return out;
}

void print_json(const ModelFacts& facts, const InfoOptions& options) {
    const ModelConfig& c = facts.config;
    const WeightSummary& w = facts.weights;
    const LayerKinds kinds = layer_kinds(c);
    const int n = c.num_hidden_layers;
    auto kind_json = [n](const std::function<bool(int)>& pick) {
        std::vector<int> layers;
        for (int i = 0; i < n; ++i) {
            if (pick(i)) {
                layers.push_back(i);
            }
        }
        return json{{"count", layers.size()}, {"layers", layers}};
    };

    json doc;
    doc["model_dir"] = facts.dir;
    doc["config"] = facts.config_path;
    doc["config_layout"] = c.text_prefix.empty() ? "flat" : "text_config";
    doc["architectures"] = c.architectures;
    doc["model_type"] = c.model_type;
    doc["shape"] = {{"hidden_size", c.hidden_size},
                    {"num_hidden_layers", n},
                    {"num_attention_heads", c.num_attention_heads},
                    {"num_key_value_heads", c.num_key_value_heads},
                    {"head_dim", c.head_dim},
                    {"rotary_dim", c.rotary_dim},
                    {"vocab_size", c.vocab_size},
                    {"max_position_embeddings", c.max_position_embeddings},
                    {"tie_word_embeddings", c.tie_word_embeddings},
                    {"dense_intermediate_size", c.dense_intermediate_size},
                    {"intermediate_size", c.intermediate_size},
                    {"num_local_experts", c.num_local_experts},
                    {"num_experts_per_tok", c.num_experts_per_tok},
                    {"n_shared_experts", c.n_shared_experts},
                    {"shared_intermediate_size", c.shared_intermediate_size}};
    doc["sparse_attention"] = {{"enabled", c.sparse.use_sparse_attention},
                               {"topk_blocks", c.sparse.topk_blocks},
                               {"block_size", c.sparse.block_size},
                               {"num_index_heads", c.sparse.num_index_heads},
                               {"index_dim", c.sparse.index_dim}};
    doc["layers"] = {{"total", n},
                     {"dense_attention", kind_json(kinds.dense_attention)},
                     {"msa_attention", kind_json(kinds.msa)},
                     {"dense_mlp", kind_json(kinds.dense_mlp)},
                     {"moe", kind_json(kinds.moe)}};

    json weights = {{"source", w.from_headers ? "safetensors_headers" : "config_estimate"},
                    {"notes", w.notes},
                    {"by_format", count_map_json(w.by_format, weight_format_name)},
                    {"by_part", count_map_json(w.by_group, weight_group_name)},
                    {"total", count_json(w.total)},
                    {"active_params_per_token", w.active_params},
                    {"embedding_and_lm_head_params", w.embedding_params}};
    if (w.from_headers) {
        weights["by_stored_dtype"] = count_map_json(w.by_dtype, [](const std::string& dtype) { return dtype; });
        weights["vision_skipped"] = count_json(w.vision);
        weights["unused"] = count_json(w.unused);
    }
    if (facts.index_total_size) {
        weights["index_total_size"] = *facts.index_total_size;
    }
    if (facts.index_only) {
        weights["index"] = {{"path", facts.index_only->path},
                            {"tensors", facts.index_only->tensors},
                            {"vision_tensors", facts.index_only->vision_tensors},
                            {"shards", facts.index_only->shards},
                            {"shards_present", 0}};
    }
    doc["weights"] = weights;

    json per_token = json::array();
    for (KvCacheDtype dtype : kAllKvCacheDtypes) {
        const KvFootprint f = kv_footprint(c, dtype, 1);
        per_token.push_back({{"dtype", kv_cache_dtype_name(dtype)},
                             {"kv_bytes", f.kv_bytes},
                             {"index_k_bytes", f.index_bytes},
                             {"total_bytes", f.total()}});
    }
    doc["kv_cache"] = {{"default_dtype", kv_cache_dtype_name(c.default_kv_cache_dtype())}, {"per_token", per_token}};

    const CapacityRequest& r = options.capacity;
    json per_dtype = json::array();
    const auto plans = capacity_plans(facts, r);
    for (const auto& plan : plans) {
        per_dtype.push_back({{"dtype", kv_cache_dtype_name(plan.per_token.dtype)},
                             {"kv_bytes_per_token_per_gpu", plan.per_token.kv_bytes},
                             {"index_k_bytes_per_token_per_gpu", plan.per_token.index_bytes},
                             {"bytes_per_sequence_per_gpu", plan.bytes_per_sequence},
                             {"max_sequences", plan.max_sequences},
                             {"max_cached_tokens", plan.max_cached_tokens}});
    }
    doc["capacity"] = {{"context_tokens", r.context_tokens},
                       {"tokens_per_sequence", plans[0].tokens_per_sequence},
                       {"gpu_memory_gib", r.gpu_memory_gib},
                       {"gpu_memory_utilization", r.memory_utilization},
                       {"tp", r.tp},
                       {"usable_bytes_per_gpu", plans[0].usable_bytes},
                       {"weight_bytes_per_gpu", plans[0].weight_bytes},
                       {"kv_cache_bytes_per_gpu", plans[0].cache_bytes},
                       {"weights_fit", plans[0].cache_bytes > 0},
                       {"per_dtype", per_dtype}};
    std::fputs((doc.dump(2) + "\n").c_str(), stdout);
}

}  // namespace

void register_info_command(CLI::App& app, CommandBody& body) {
    auto options = std::make_shared<InfoOptions>();
    CLI::App* cmd = app.add_subcommand(
        "info", "Summarise a model directory: shape, layer kinds, weights, KV-cache bytes per token and capacity");
    cmd->add_option("MODEL_DIR", options->model_dir, "Model directory (config.json, optional safetensors and index)")
        ->required();
    options->capacity.context_tokens = 0;  // 0: min(131072, max_position_embeddings), resolved once the config is read
    cmd->add_option("--context", options->capacity.context_tokens,
                    "Context length per sequence for the capacity plan (default: 131072 or the model's maximum, "
                    "whichever is smaller)");
    cmd->add_option("--gpu-memory-gib", options->capacity.gpu_memory_gib, "Memory of one GPU in GiB")
        ->capture_default_str();
    cmd->add_option("--gpu-memory-utilization", options->capacity.memory_utilization,
                    "Fraction of each GPU's memory for weights and KV cache")
        ->capture_default_str();
    cmd->add_option("--tp", options->capacity.tp, "Tensor-parallel size (GPUs)")->capture_default_str();
    cmd->add_flag("--json", options->json_output, "Print the summary as JSON");
    cmd->callback([options, &body] {
        body = [options] {
            const ModelFacts facts = gather(*options);
            if (options->capacity.context_tokens == 0) {
                options->capacity.context_tokens =
                    std::min<std::int64_t>(kDefaultContext, facts.config.max_position_embeddings);
            }
            if (options->json_output) {
                print_json(facts, *options);
            } else {
                print_text(facts, *options);
            }
            return 0;
        };
    });
}

}  // namespace msa::cli
