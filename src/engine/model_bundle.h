// Everything a front end (the CLI, the server) takes from a model directory besides the weights: config.json,
// tokenizer.json, the chat template, generation_config.json's sampling defaults and the EOS token ids, plus the
// lookup of the default model directory. The weights are loaded separately (cpu_model_executor.h).
//
//   auto dir = msa::resolve_model_dir(flag_value);        // the flag, else the default model, else msa::Error
//   msa::ModelBundle bundle = msa::load_model_bundle(dir);
//   auto ids = bundle.tokenizer->encode(bundle.chat_template->render(request), /*add_special_tokens=*/false);
//   msa::SamplingParams p = bundle.generation.sampling_params();   // then override with the user's fields
//   engine_config.eos_token_ids = bundle.eos_token_ids;
#pragma once

#include "chat/chat_template.h"
#include "engine/sampling_params.h"
#include "engine/token_text.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace msa {

// Sampling defaults of generation_config.json (the fields vLLM takes from it); unset when absent.
struct GenerationDefaults {
    std::optional<float> temperature, top_p, min_p, repetition_penalty;
    std::optional<std::int32_t> top_k;
    std::optional<std::int32_t> max_new_tokens;

    // SamplingParams{} with these defaults applied (max_new_tokens -> max_tokens); callers then set what the
    // user asked for explicitly.
    SamplingParams sampling_params() const;
};

struct ModelBundle {
    std::filesystem::path dir;
    std::string name;  // the directory's name (e.g. the served model name)
    ModelConfig config;
    // Null when the directory has no tokenizer.json (token-id-only use) or no chat template.
    std::shared_ptr<const Tokenizer> tokenizer;
    std::shared_ptr<const TokenTextSource> text;  // over `tokenizer`, for the Engine (null without tokenizer)
    std::shared_ptr<const ChatTemplate> chat_template;
    GenerationDefaults generation;
    // Union, in this order without repeats, of generation_config.json's eos_token_id (an id or a list),
    // config.json's eos_token_id (top level or text_config) and tokenizer_config.json's eos_token (text or
    // {"content"}) looked up in the tokenizer. Ids outside the model's vocabulary are dropped with a warning.
    std::vector<std::int32_t> eos_token_ids;
};

// Loads the directory's config.json (required), tokenizer.json, chat template (chat_template.jinja,
// chat_template.json or tokenizer_config.json's "chat_template") and generation_config.json. Throws msa::Error
// naming the file at fault; a missing optional file just leaves its field empty.
ModelBundle load_model_bundle(const std::filesystem::path& dir);

// Where the default model is looked for: ./models, then <source tree>/models (the tree this binary was built
// from), then <directory of the executable>/../models.
std::vector<std::filesystem::path> default_model_roots();
// The first directory (by name) under the first root that has one containing config.json; nullopt if none.
std::optional<std::filesystem::path> find_default_model_dir(
    const std::vector<std::filesystem::path>& roots = default_model_roots());
// `flag` when non-empty (it must exist and hold config.json), else find_default_model_dir(); throws msa::Error
// saying where it looked when there is none.
std::filesystem::path resolve_model_dir(const std::string& flag);

}  // namespace msa
