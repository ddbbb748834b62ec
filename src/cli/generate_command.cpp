// `msa generate --model DIR`: continues a prompt of token ids (from --prompt-ids or stdin) greedily or with seeded
// sampling, streaming the new token ids to stdout and the speed to stderr. Runs the model directly on one
// sequence until the engine API takes over.
#include "cli/commands.h"
#include "cli/model_cli.h"
#include "core/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

namespace msa::cli {
namespace {

struct GenerateOptions {
    ModelFlags model;
    std::string prompt_ids;
    int max_tokens = 64;
    double temperature = 0.0;
    int top_k = 0;
    double top_p = 1.0;
    std::uint64_t seed = 0;
    std::vector<std::int32_t> stop_ids;
    bool ignore_eos = false;
};

// eos_token_id of generation_config.json (an id or a list), if the model directory has one.
std::vector<std::int32_t> eos_ids(const std::string& dir) {
    const auto path = std::filesystem::path(dir) / "generation_config.json";
    if (!std::filesystem::exists(path)) return {};
    std::ifstream in(path);
    const auto doc = nlohmann::json::parse(in, nullptr, false);
    MSA_CHECK(!doc.is_discarded(), "{} is not valid JSON", path.string());
    std::vector<std::int32_t> ids;
    const auto it = doc.find("eos_token_id");
    if (it == doc.end()) return ids;
    if (it->is_number_integer()) ids.push_back(it->get<std::int32_t>());
    if (it->is_array())
        for (const auto& v : *it)
            if (v.is_number_integer()) ids.push_back(v.get<std::int32_t>());
    return ids;
}

// Greedy (temperature 0: the lowest id among the maxima) or temperature / top-k / top-p sampling.
std::int32_t choose(const float* logits, std::int32_t vocab, const GenerateOptions& o, std::mt19937_64& rng) {
    if (o.temperature <= 0.0) return static_cast<std::int32_t>(std::max_element(logits, logits + vocab) - logits);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
    std::size_t keep = ids.size();
    if (o.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(o.top_k));
    std::vector<double> p(keep);
    const double mx = logits[ids[0]];
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) sum += (p[i] = std::exp((logits[ids[i]] - mx) / o.temperature));
    if (o.top_p < 1.0) {
        double cum = 0;
        std::size_t cut = 0;
        while (cut < keep && cum < o.top_p * sum) cum += p[cut++];
        keep = std::max<std::size_t>(cut, 1);
        sum = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
    }
    double r = std::uniform_real_distribution<double>(0.0, sum)(rng);
    for (std::size_t i = 0; i < keep; ++i) {
        if ((r -= p[i]) < 0) return ids[i];
    }
    return ids[keep - 1];
}

int run_generate(const GenerateOptions& o) {
    MSA_CHECK(o.max_tokens >= 0, "--max-tokens must not be negative, got {}", o.max_tokens);
    const std::string prompt_text = o.prompt_ids.empty() ? read_all("-") : o.prompt_ids;
    const auto prompt = parse_token_ids(prompt_text, o.prompt_ids.empty() ? "stdin" : "--prompt-ids");
    MSA_CHECK(!prompt.empty(), "the prompt is empty: give token ids with --prompt-ids or on stdin");
    auto model = load_model(o.model, static_cast<std::int64_t>(prompt.size()) + o.max_tokens);
    std::vector<std::int32_t> stops = o.stop_ids;
    if (!o.ignore_eos) {
        const auto eos = eos_ids(o.model.model_dir);
        stops.insert(stops.end(), eos.begin(), eos.end());
    }
    std::mt19937_64 rng(o.seed);
    SingleSequence seq(*model);
    const auto t0 = std::chrono::steady_clock::now();
    auto logits = seq.append(prompt, 1);
    const auto t1 = std::chrono::steady_clock::now();
    int generated = 0;
    while (generated < o.max_tokens) {
        const std::int32_t next = choose(logits.data(), model->vocab_size(), o, rng);
        std::printf(generated == 0 ? "%d" : " %d", next);
        std::fflush(stdout);
        ++generated;
        if (std::find(stops.begin(), stops.end(), next) != stops.end() || generated == o.max_tokens) break;
        logits = seq.append({next}, 1);
    }
    std::printf("\n");
    const auto t2 = std::chrono::steady_clock::now();
    const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
    const double decode_s = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %d tokens in %.3f s (%.2f tokens/s)\n",
                 prompt.size(), prefill_s, static_cast<double>(prompt.size()) / prefill_s, generated, decode_s,
                 generated > 1 ? (generated - 1) / decode_s : 0.0);
    return 0;
}

}  // namespace

void register_generate_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App* cmd = app.add_subcommand("generate",
                                       "Continue a prompt of token ids; prints the new ids to stdout as they come");
    add_model_flags(*cmd, o->model);
    cmd->add_option("--prompt-ids", o->prompt_ids, "prompt token ids, e.g. \"1 2 3\" (default: read from stdin)");
    cmd->add_option("--max-tokens", o->max_tokens, "tokens to generate")->capture_default_str();
    cmd->add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o->top_k, "sample among the k most likely tokens (0: all)")->capture_default_str();
    cmd->add_option("--top-p", o->top_p, "nucleus sampling threshold")->capture_default_str();
    cmd->add_option("--seed", o->seed, "sampling seed (same seed, same output)")->capture_default_str();
    cmd->add_option("--stop-ids", o->stop_ids, "token ids that end generation (besides the model's eos)");
    cmd->add_flag("--ignore-eos", o->ignore_eos, "do not stop at generation_config.json's eos_token_id");
    cmd->callback([o, &body] { body = [o] { return run_generate(*o); }; });
}

}  // namespace msa::cli
