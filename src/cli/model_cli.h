// Shared pieces of the subcommands that run the model directly (generate, score): the flags that choose model
// options, token-id input (until the tokenizer lands), and a single-sequence driver with its own contiguous page
// assignment (these commands move onto the engine API once it exists).
#pragma once

#include "model/minimax_m3_model.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace msa::cli {

struct ModelFlags {
    std::string model_dir;
    std::string kv_cache_dtype;  // "", "nvfp4", "fp8", "bf16"
    std::string numerics = "exact";
    std::string topk_mode = "keyed";
    std::string activations = "int8";
    bool dense_attention = false;
    int topk_blocks = 0;
    int threads = 0;
};

void add_model_flags(CLI::App& cmd, ModelFlags& flags);
// The same flags without --model (kv dtype, numerics, top-k mode, activations, dense attention, top-k blocks,
// threads), for commands that find the model directory themselves.
void add_model_option_flags(CLI::App& cmd, ModelFlags& flags);
// The ModelOptions the flags choose (num_kv_pages left at its default); throws msa::Error naming a bad flag.
ModelOptions model_options(const ModelFlags& flags);

// Loads the model with room for `max_tokens` tokens of one sequence.
std::unique_ptr<MiniMaxM3Model> load_model(const ModelFlags& flags, std::int64_t max_tokens);

// Token ids separated by whitespace or commas; throws msa::Error naming the source on anything else.
std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& source);
// Reads all of a file ("-" for stdin).
std::string read_all(const std::string& path);

// One sequence on pages 0, 1, 2, ...: appends tokens in chunks and returns the logits the step asked for.
class SingleSequence {
public:
    explicit SingleSequence(MiniMaxM3Model& model);
    // Runs `tokens` as the next tokens of the sequence (split into steps of at most `chunk` tokens) and returns the
    // logits of the last `num_logits` of them.
    std::vector<float> append(const std::vector<std::int32_t>& tokens, std::int32_t num_logits,
                              std::int32_t chunk = 512);
    std::int32_t length() const { return length_; }

private:
    MiniMaxM3Model& model_;
    std::vector<std::int32_t> pages_;
    std::int32_t length_ = 0;
};

}  // namespace msa::cli
