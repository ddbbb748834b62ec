// `msa score --model DIR (--text FILE | --ids FILE)`: per-token log-probabilities and perplexity as JSON on stdout.
// Text is tokenized with the model directory's tokenizer.json (or --tokenizer), with its template (e.g. a leading
// BOS) unless --no-special-tokens; --ids takes token ids directly. Token i (i >= 1) is scored by
// log p(token_i | tokens before it); the first token is context only.
#include "cli/commands.h"
#include "cli/model_cli.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>

namespace msa::cli {
namespace {

struct ScoreOptions {
    ModelFlags model;
    std::string ids_file;
    std::string text_file;
    std::string tokenizer_file;  // default: <model>/tokenizer.json
    bool add_special_tokens = true;
    int chunk = 512;
    bool per_token = true;
};

struct ScoredInput {
    std::vector<std::int32_t> ids;
    std::optional<Tokenizer> tokenizer;  // set for text input
};

ScoredInput read_input(const ScoreOptions& o) {
    MSA_CHECK(o.ids_file.empty() || o.text_file.empty(), "give either --text or --ids, not both");
    ScoredInput in;
    if (o.text_file.empty()) {
        const std::string src = o.ids_file.empty() ? "-" : o.ids_file;
        in.ids = parse_token_ids(read_all(src), src == "-" ? "stdin" : src);
        return in;
    }
    const std::string tok_path = o.tokenizer_file.empty()
                                     ? (std::filesystem::path(o.model.model_dir) / "tokenizer.json").string()
                                     : o.tokenizer_file;
    MSA_CHECK(std::filesystem::exists(tok_path),
              "--text needs a tokenizer: '{}' does not exist (give --tokenizer FILE, or --ids with token ids)",
              tok_path);
    in.tokenizer.emplace(Tokenizer::from_file(tok_path));
    const std::string text = read_all(o.text_file);
    for (TokenId id : in.tokenizer->encode(text, o.add_special_tokens)) in.ids.push_back(static_cast<std::int32_t>(id));
    return in;
}

int run_score(const ScoreOptions& o) {
    MSA_CHECK(o.chunk >= 1, "--chunk must be at least 1, got {}", o.chunk);
    const ScoredInput input = read_input(o);
    const auto& tokens = input.ids;
    MSA_CHECK(tokens.size() >= 2, "scoring needs at least two tokens, got {}", tokens.size());
    auto model = load_model(o.model, static_cast<std::int64_t>(tokens.size()));
    const std::int64_t vocab = model->vocab_size();
    if (input.tokenizer)
        MSA_CHECK(input.tokenizer->id_limit() <= static_cast<std::size_t>(vocab),
                  "the tokenizer has ids up to {} but the model's vocabulary has {} entries", input.tokenizer->id_limit(),
                  vocab);
    for (std::size_t i = 0; i < tokens.size(); ++i)
        MSA_CHECK(tokens[i] < vocab, "token {} (id {}) is outside the model's vocabulary of {} entries", i, tokens[i],
                  vocab);
    SingleSequence seq(*model);
    const auto t0 = std::chrono::steady_clock::now();
    // Logits of every position but the last predict tokens 1..n-1.
    const std::vector<std::int32_t> context(tokens.begin(), tokens.end() - 1);
    const auto logits = seq.append(context, static_cast<std::int32_t>(context.size()), o.chunk);
    const auto t1 = std::chrono::steady_clock::now();
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
    out["input"] = input.tokenizer ? "text" : "ids";
    out["tokens"] = tokens.size();
    out["scored_tokens"] = logprobs.size();
    out["nll_sum"] = nll;
    out["mean_nll"] = mean;
    out["perplexity"] = std::exp(mean);
    out["kv_cache_dtype"] = std::string(kv_cache_dtype_name(model->kv_dtype()));
    out["numerics"] = o.model.numerics;
    out["seconds"] = std::chrono::duration<double>(t1 - t0).count();
    if (o.per_token) {
        out["token_ids"] = tokens;
        out["logprobs"] = logprobs;  // logprobs[i] scores token_ids[i + 1]
        if (input.tokenizer) {
            nlohmann::json texts = nlohmann::json::array();
            for (std::int32_t id : tokens) {
                const TokenId t = static_cast<TokenId>(id);
                texts.push_back(input.tokenizer->decode(std::span<const TokenId>(&t, 1)));
            }
            out["token_texts"] = std::move(texts);
        }
    }
    std::cout << out.dump(1) << "\n";
    return 0;
}

}  // namespace

void register_score_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<ScoreOptions>();
    CLI::App* cmd = app.add_subcommand("score", "Per-token log-probabilities and perplexity of a text or token ids (JSON)");
    add_model_flags(*cmd, o->model);
    cmd->add_option("--text", o->text_file, "text file to tokenize and score (- for stdin)");
    cmd->add_option("--ids", o->ids_file, "file of token ids separated by spaces or commas (- for stdin; the default)");
    cmd->add_option("--tokenizer", o->tokenizer_file, "tokenizer.json for --text (default: the model directory's)");
    cmd->add_flag("!--no-special-tokens", o->add_special_tokens,
                  "--text: do not add the tokenizer template's tokens (e.g. a leading BOS)");
    cmd->add_option("--chunk", o->chunk, "prefill chunk size in tokens")->capture_default_str();
    cmd->add_flag("!--no-per-token", o->per_token, "omit the per-token ids and log-probabilities from the output");
    cmd->callback([o, &body] { body = [o] { return run_score(*o); }; });
}

}  // namespace msa::cli
