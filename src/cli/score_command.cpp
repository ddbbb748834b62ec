// `msa score --model DIR --ids FILE`: per-token log-probabilities and perplexity of a sequence of token ids, as
// JSON on stdout. Token i (i >= 1) is scored by log p(token_i | tokens before it).
#include "cli/commands.h"
#include "cli/model_cli.h"
#include "core/error.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace msa::cli {
namespace {

struct ScoreOptions {
    ModelFlags model;
    std::string ids_file = "-";
    int chunk = 512;
    bool per_token = true;
};

int run_score(const ScoreOptions& o) {
    MSA_CHECK(o.chunk >= 1, "--chunk must be at least 1, got {}", o.chunk);
    const auto tokens = parse_token_ids(read_all(o.ids_file), o.ids_file == "-" ? "stdin" : o.ids_file);
    MSA_CHECK(tokens.size() >= 2, "scoring needs at least two token ids, got {}", tokens.size());
    auto model = load_model(o.model, static_cast<std::int64_t>(tokens.size()));
    SingleSequence seq(*model);
    const auto t0 = std::chrono::steady_clock::now();
    // Logits of every position but the last predict tokens 1..n-1.
    const std::vector<std::int32_t> context(tokens.begin(), tokens.end() - 1);
    const auto logits = seq.append(context, static_cast<std::int32_t>(context.size()), o.chunk);
    const auto t1 = std::chrono::steady_clock::now();
    const std::int64_t vocab = model->vocab_size();
    std::vector<double> logprobs(context.size());
    double nll = 0;
    for (std::size_t i = 0; i < context.size(); ++i) {
        const float* row = logits.data() + i * static_cast<std::size_t>(vocab);
        double mx = row[0];
        for (std::int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
        double sum = 0;
        for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
        logprobs[i] = row[tokens[i + 1]] - mx - std::log(sum);
        nll -= logprobs[i];
    }
    const double mean = nll / static_cast<double>(logprobs.size());
    nlohmann::json out;
    out["model"] = o.model.model_dir;
    out["tokens"] = tokens.size();
    out["scored_tokens"] = logprobs.size();
    out["nll_sum"] = nll;
    out["mean_nll"] = mean;
    out["perplexity"] = std::exp(mean);
    out["kv_cache_dtype"] = std::string(kv_cache_dtype_name(model->kv_dtype()));
    out["numerics"] = o.model.numerics;
    out["seconds"] = std::chrono::duration<double>(t1 - t0).count();
    if (o.per_token) out["logprobs"] = logprobs;
    std::cout << out.dump(1) << "\n";
    return 0;
}

}  // namespace

void register_score_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<ScoreOptions>();
    CLI::App* cmd = app.add_subcommand("score", "Per-token log-probabilities and perplexity of token ids (JSON)");
    add_model_flags(*cmd, o->model);
    cmd->add_option("--ids", o->ids_file, "file of token ids separated by spaces or commas (- for stdin)")
        ->capture_default_str();
    cmd->add_option("--chunk", o->chunk, "prefill chunk size in tokens")->capture_default_str();
    cmd->add_flag("!--no-per-token", o->per_token, "omit the per-token log-probabilities from the output");
    cmd->callback([o, &body] { body = [o] { return run_score(*o); }; });
}

}  // namespace msa::cli
