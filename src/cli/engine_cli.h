// Shared pieces of the subcommands that run the model through the Engine (generate, chat): flags choosing the model
// directory, KV cache and numerics; sampling flags layered over generation_config.json's defaults; and loading
// the model bundle, the CPU executor and the engine in one call.
#pragma once

#include "cli/model_cli.h"
#include "engine/cpu_model_executor.h"
#include "engine/engine.h"
#include "engine/model_bundle.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace msa::cli {

struct EngineFlags {
    ModelFlags model;         // model_dir empty: the default model directory; numerics, KV dtype, threads
    double kv_cache_gib = 0;  // KV page pool budget (0: the executor's default)
    int kv_pages = 0;         // or an exact page count
    int max_model_len = 0;
    int max_num_batched_tokens = 2048;
    bool no_prefix_caching = false;
    // Speculative decoding: vLLM's --speculative-config JSON, or the shorthand --num-speculative-tokens (the
    // model directory's DSpark drafter, drafter/).
    std::string speculative_config;
    int num_speculative_tokens = 0;
};
void add_engine_flags(CLI::App& cmd, EngineFlags& flags);

// Unset flags take generation_config.json's value, else SamplingParams' default.
struct SamplingFlags {
    std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
    std::optional<std::int32_t> top_k, max_tokens;
    std::optional<std::uint64_t> seed;
    std::vector<std::string> stop;
    std::vector<std::int32_t> stop_ids;
    bool ignore_eos = false;
};
void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags, std::int32_t default_max_tokens);
SamplingParams sampling_params(const SamplingFlags& flags, const GenerationDefaults& defaults,
                               std::int32_t default_max_tokens);

// The CPU executor options the flags choose; throws msa::Error naming a bad flag.
CpuModelExecutorOptions executor_options(const EngineFlags& flags);

// What the speculative-decoding flags ask for; nullopt when they are off. Throws msa::Error naming the flag or
// the JSON key at fault.
struct SpeculativeSettings {
    std::filesystem::path drafter_dir;
    std::int32_t num_tokens = 0;  // 0: the drafter's block size
};
std::optional<SpeculativeSettings> speculative_settings(const EngineFlags& flags,
                                                        const std::filesystem::path& model_dir);
// Loads the drafter the settings name for the target in model_dir and sets config.num_speculative_tokens.
std::unique_ptr<Drafter> load_drafter(const SpeculativeSettings& settings, const std::filesystem::path& model_dir,
                                      EngineConfig& config);

// The model directory, its weights on the CPU, the drafter if asked for, and an engine over them (declared in
// destruction order).
struct LoadedEngine {
    ModelBundle bundle;
    std::unique_ptr<ModelExecutor> model;
    std::unique_ptr<Drafter> drafter;
    std::unique_ptr<Engine> engine;
};
std::unique_ptr<LoadedEngine> load_engine(const EngineFlags& flags);

// Prints a finished request's figures on stderr: prompt and generated tokens, time to first token, decode speed.
void print_request_speed(const RequestEvent& final_event, std::int32_t prompt_tokens);
// Prints the engine's speculative-decoding counters on stderr (nothing when no drafts were made).
void print_speculative_stats(const EngineStats& stats);

}  // namespace msa::cli
