#include "cli/engine_cli.h"

#include "core/error.h"
#include "core/log.h"
#include "engine/dspark_drafter.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace msa::cli {

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
    cmd.add_option("--model", f.model.model_dir,
                   "model directory (config.json, safetensors, tokenizer.json; default: the first directory with a "
                   "config.json under ./models or the source tree's models/)");
    add_model_option_flags(cmd, f.model);
    cmd.add_option("--kv-cache-gib", f.kv_cache_gib, "KV cache budget in GiB (default: 2)");
    cmd.add_option("--kv-pages", f.kv_pages, "KV cache size in 128-token pages (overrides --kv-cache-gib)");
    cmd.add_option("--max-model-len", f.max_model_len, "longest prompt + output (default: the config's)");
    cmd.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "token budget of one step (prefill chunk)")
        ->capture_default_str();
    cmd.add_flag("--no-prefix-caching", f.no_prefix_caching, "do not reuse cached prompt pages");
    cmd.add_option("--speculative-config", f.speculative_config,
                   "speculative decoding, as JSON: {\"method\": \"dspark\", \"model\": DRAFTER_DIR (default: the "
                   "model's drafter/), \"num_speculative_tokens\": N (default: the drafter's block size)}");
    cmd.add_option("--num-speculative-tokens", f.num_speculative_tokens,
                   "speculative decoding with the model's DSpark drafter (drafter/): drafts verified per step");
}

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f, std::int32_t default_max_tokens) {
    cmd.add_option("--max-tokens", f.max_tokens,
                   fmt::format("tokens to generate at most (default: generation_config.json's max_new_tokens, "
                               "else {})",
                               default_max_tokens));
    cmd.add_option("--temperature", f.temperature, "0 = greedy (default: generation_config.json's, else 1)");
    cmd.add_option("--top-p", f.top_p, "nucleus sampling threshold");
    cmd.add_option("--top-k", f.top_k, "sample among the k most likely tokens (0: all)");
    cmd.add_option("--min-p", f.min_p, "drop tokens below min_p times the most likely one's probability");
    cmd.add_option("--repetition-penalty", f.repetition_penalty, "HF repetition penalty (1: off)");
    cmd.add_option("--presence-penalty", f.presence_penalty, "OpenAI presence penalty");
    cmd.add_option("--frequency-penalty", f.frequency_penalty, "OpenAI frequency penalty");
    cmd.add_option("--seed", f.seed, "sampling seed (same seed, same output; default: random)");
    cmd.add_option("--stop", f.stop, "stop string (repeatable); it is not printed");
    cmd.add_option("--stop-ids", f.stop_ids, "token ids that end generation (besides the model's EOS)");
    cmd.add_flag("--ignore-eos", f.ignore_eos, "keep generating past the model's EOS tokens");
}

SamplingParams sampling_params(const SamplingFlags& f, const GenerationDefaults& defaults,
                               std::int32_t default_max_tokens) {
    SamplingParams p = defaults.sampling_params();
    if (!p.max_tokens) p.max_tokens = default_max_tokens;
    if (f.temperature) p.temperature = *f.temperature;
    if (f.top_p) p.top_p = *f.top_p;
    if (f.top_k) p.top_k = *f.top_k;
    if (f.min_p) p.min_p = *f.min_p;
    if (f.repetition_penalty) p.repetition_penalty = *f.repetition_penalty;
    if (f.presence_penalty) p.presence_penalty = *f.presence_penalty;
    if (f.frequency_penalty) p.frequency_penalty = *f.frequency_penalty;
    if (f.max_tokens) p.max_tokens = *f.max_tokens;
    p.seed = f.seed;
    p.stop = f.stop;
    p.stop_token_ids = f.stop_ids;
    p.ignore_eos = f.ignore_eos;
    return p;
}

CpuModelExecutorOptions executor_options(const EngineFlags& f) {
    const ModelOptions m = model_options(f.model);
    CpuModelExecutorOptions o;
    o.kv_cache_dtype = m.kv_cache_dtype;
    o.attention_numerics = m.attention_numerics;
    o.topk_mode = m.topk_mode;
    o.activations = m.activations;
    o.dense_attention = m.dense_attention;
    o.topk_blocks = m.topk_blocks;
    o.threads = f.model.threads;
    MSA_CHECK(f.kv_cache_gib >= 0, "--kv-cache-gib must not be negative, got {}", f.kv_cache_gib);
    o.kv_cache_bytes = static_cast<std::uint64_t>(f.kv_cache_gib * static_cast<double>(1ull << 30));
    o.num_kv_pages = f.kv_pages;
    o.max_model_len = f.max_model_len;
    return o;
}

std::optional<SpeculativeSettings> speculative_settings(const EngineFlags& f, const std::filesystem::path& model_dir) {
    MSA_CHECK(f.num_speculative_tokens >= 0, "--num-speculative-tokens must not be negative, got {}",
              f.num_speculative_tokens);
    MSA_CHECK(f.speculative_config.empty() || f.num_speculative_tokens == 0,
              "give either --speculative-config or --num-speculative-tokens, not both");
    SpeculativeSettings s;
    s.drafter_dir = model_dir / "drafter";
    if (f.num_speculative_tokens > 0) {
        s.num_tokens = f.num_speculative_tokens;
        return s;
    }
    if (f.speculative_config.empty()) return std::nullopt;
    const auto doc = nlohmann::json::parse(f.speculative_config, nullptr, false);
    MSA_CHECK(!doc.is_discarded() && doc.is_object(),
              "--speculative-config must be a JSON object, e.g. '{{\"method\": \"dspark\", "
              "\"num_speculative_tokens\": 7}}', got '{}'",
              f.speculative_config);
    for (const auto& [key, value] : doc.items()) {
        if (key == "method") {
            MSA_CHECK(value.is_string() && value.get<std::string>() == "dspark",
                      "--speculative-config: method must be \"dspark\" (the only drafter this engine has), got {}",
                      value.dump());
        } else if (key == "model") {
            MSA_CHECK(value.is_string() && !value.get<std::string>().empty(),
                      "--speculative-config: model must be a directory path, got {}", value.dump());
            s.drafter_dir = value.get<std::string>();
        } else if (key == "num_speculative_tokens") {
            MSA_CHECK(value.is_number_integer() && value.get<std::int64_t>() > 0 && value.get<std::int64_t>() < 1024,
                      "--speculative-config: num_speculative_tokens must be a positive integer, got {}", value.dump());
            s.num_tokens = value.get<std::int32_t>();
        } else {
            fail("--speculative-config: unknown key '{}' (known: method, model, num_speculative_tokens)", key);
        }
    }
    MSA_CHECK(doc.contains("method"), "--speculative-config needs \"method\": \"dspark\"");
    return s;
}

std::unique_ptr<Drafter> load_drafter(const SpeculativeSettings& s, const std::filesystem::path& model_dir,
                                      EngineConfig& config) {
    MSA_CHECK(std::filesystem::is_directory(s.drafter_dir),
              "speculative decoding: no drafter directory {} (a DSpark drafter has config.json and "
              "model.safetensors)",
              s.drafter_dir.string());
    DSparkLoadOptions options;
    options.target_dir = model_dir.string();  // the drafter shares the served model's embeddings and lm_head
    auto drafter = load_dspark_drafter(s.drafter_dir.string(), options);
    const std::int32_t block = drafter->model().config().block_size;
    const std::int32_t k = s.num_tokens == 0 ? block : s.num_tokens;
    MSA_CHECK(k <= block, "speculative decoding: {} speculative tokens asked for, but the drafter drafts {} per block",
              k, block);
    config.num_speculative_tokens = k;
    MSA_LOG_INFO("speculative decoding: DSpark drafter {} ({} tokens per step)", s.drafter_dir.string(), k);
    return drafter;
}

std::unique_ptr<LoadedEngine> load_engine(const EngineFlags& f) {
    auto e = std::make_unique<LoadedEngine>();
    e->bundle = load_model_bundle(resolve_model_dir(f.model.model_dir));
    e->model = load_cpu_model_executor(e->bundle.dir, executor_options(f));
    MSA_CHECK(f.max_num_batched_tokens > 0, "--max-num-batched-tokens must be positive, got {}",
              f.max_num_batched_tokens);
    EngineConfig config;
    config.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
    config.scheduler.enable_prefix_caching = !f.no_prefix_caching;
    config.eos_token_ids = e->bundle.eos_token_ids;
    if (const auto spec = speculative_settings(f, e->bundle.dir)) e->drafter = load_drafter(*spec, e->bundle.dir, config);
    e->engine = std::make_unique<Engine>(config, *e->model, e->bundle.text.get(), e->drafter.get());
    MSA_LOG_DEBUG("model {}: {} KV pages, max_model_len {}", e->bundle.dir.string(), e->model->num_kv_pages(),
                  e->model->max_model_len());
    return e;
}

void print_request_speed(const RequestEvent& final_event, std::int32_t prompt_tokens) {
    if (!final_event.usage || !final_event.timings) return;
    const Usage& u = *final_event.usage;
    const RequestTimings& t = *final_event.timings;
    const double decode_rate = u.completion_tokens > 1 && t.decode > 0 ? (u.completion_tokens - 1) / t.decode : 0.0;
    std::fprintf(stderr,
                 "[%d prompt tokens (%d cached), %d generated; time to first token %.3f s (%.1f prompt tokens/s); "
                 "decode %.2f tokens/s]\n",
                 prompt_tokens, u.cached_tokens, u.completion_tokens, t.ttft,
                 t.prefill > 0 ? (prompt_tokens - u.cached_tokens) / t.prefill : 0.0, decode_rate);
}

void print_speculative_stats(const EngineStats& s) {
    if (s.spec_num_drafts == 0) return;
    std::fprintf(stderr,
                 "[speculative decoding: %lld drafts, %lld of %lld draft tokens accepted (%.1f%%), acceptance length "
                 "%.2f tokens per step]\n",
                 static_cast<long long>(s.spec_num_drafts), static_cast<long long>(s.spec_num_accepted_tokens),
                 static_cast<long long>(s.spec_num_draft_tokens),
                 100.0 * static_cast<double>(s.spec_num_accepted_tokens) /
                     static_cast<double>(std::max<std::int64_t>(1, s.spec_num_draft_tokens)),
                 1.0 + static_cast<double>(s.spec_num_accepted_tokens) / static_cast<double>(s.spec_num_drafts));
}

}  // namespace msa::cli
