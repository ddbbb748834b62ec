// A tiny MiniMax-M3 model directory for the engine and CLI tests (random weights in the real layout, optionally
// with the tiny test tokenizer, a ChatML chat template and generation_config.json), and the model's own greedy
// loop: the independent expectation the engine's output is compared with.
#pragma once

#include "model/minimax_m3_model.h"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace msa::testing {

struct TinyModelDirSpec {
    int vocab = 384;
    int topk_blocks = 2;
    bool with_tokenizer = false;  // tokenizer.json (tests/tokenizer/data/tiny_tokenizer.json), chat template
    std::uint32_t seed = 11;
};

// Writes the directory (replacing what was there).
void write_tiny_model_dir(const std::filesystem::path& dir, const TinyModelDirSpec& spec);

// Greedy continuation of `prompt` by `n` tokens: one sequence on contiguous pages, the whole prompt as one step,
// then one token per step; arg max with ties to the lowest id.
std::vector<std::int32_t> direct_greedy(MiniMaxM3Model& model, const std::vector<std::int32_t>& prompt, int n);

}  // namespace msa::testing
