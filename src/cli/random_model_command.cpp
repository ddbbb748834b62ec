// `msa random-model --out DIR --tokenizer FILE --chat-template FILE`: writes a complete model directory with random
// weights (a small MiniMax-M3 with MSA and MoE layers, model/random_checkpoint.h), the given tokenizer.json and
// chat template, and a generation_config.json. What `make serve` serves until a trained model exists, and what
// the server's end-to-end tests run against: every file is real, only the weights are noise.
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "model/random_checkpoint.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace msa::cli {
namespace {

struct RandomModelOptions {
    std::string out;
    std::string tokenizer;
    std::string chat_template;
    std::uint32_t seed = 1;
    int hidden = 256;
    int vocab = 0;  // 0: the tokenizer's id limit rounded up to 128
};

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open '{}'", path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    MSA_CHECK(out.good(), "cannot write '{}'", path.string());
}

// Two layers covering both attention kinds and both FFN kinds: MSA + MoE, then dense attention + dense MLP.
std::string config_json(int hidden, int vocab, std::int32_t eos) {
    return fmt::format(R"({{
  "model_type": "minimax_m3", "architectures": ["MiniMaxM3SparseForCausalLM"],
  "hidden_size": {}, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 128, "vocab_size": {}, "max_position_embeddings": 65536, "eos_token_id": {},
  "rms_norm_eps": 1e-06, "use_gemma_norm": true, "use_qk_norm": true, "qk_norm_type": "per_head",
  "rope_theta": 5000000, "rotary_dim": 64, "hidden_act": "swigluoai", "attention_output_gate": false,
  "tie_word_embeddings": false,
  "moe_layer_freq": [1, 0], "dense_intermediate_size": {}, "intermediate_size": 128,
  "num_local_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "shared_intermediate_size": 128,
  "scoring_func": "sigmoid", "use_routing_bias": true, "routed_scaling_factor": 2.0,
  "sparse_attention_config": {{"use_sparse_attention": true, "sparse_index_dim": 128,
    "sparse_num_index_heads": 2, "sparse_topk_blocks": 4, "sparse_block_size": 128, "sparse_score_type": "max",
    "sparse_init_block": 0, "sparse_local_block": 1, "sparse_attention_freq": [1, 0]}}
}}
)",
                       hidden, vocab, eos, 2 * hidden);
}

int run_random_model(const RandomModelOptions& o) {
    const Tokenizer tokenizer = Tokenizer::from_file(o.tokenizer);
    const std::string chat_template = read_text(o.chat_template);
    const auto limit = static_cast<int>(tokenizer.id_limit());
    const int vocab = o.vocab > 0 ? o.vocab : (limit + 127) / 128 * 128;
    MSA_CHECK(vocab >= limit, "--vocab {} is smaller than the tokenizer's {} ids", vocab, limit);

    // EOS: the tokenizer's end-of-text token when it has one of the usual names, else its first special token.
    std::int32_t eos = -1;
    std::string eos_text;
    for (const char* name : {"[e~[", "<|endoftext|>", "</s>", "<|im_end|>"}) {
        if (const auto id = tokenizer.token_to_id(name); id && eos < 0) {
            eos = *id;
            eos_text = name;
        }
    }
    MSA_CHECK(eos >= 0, "{} has none of the usual end-of-text tokens", o.tokenizer);

    const std::filesystem::path dir(o.out);
    RandomCheckpointSpec spec;
    spec.config_json = config_json(o.hidden, vocab, eos);
    spec.seed = o.seed;
    write_random_checkpoint(dir, spec);
    std::filesystem::copy_file(o.tokenizer, dir / "tokenizer.json", std::filesystem::copy_options::overwrite_existing);
    write_text(dir / "chat_template.jinja", chat_template);
    const nlohmann::json tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                             {"eos_token", eos_text},
                                             {"add_bos_token", false},
                                             {"add_eos_token", false},
                                             {"model_max_length", 65536}};
    write_text(dir / "tokenizer_config.json", tokenizer_config.dump(1) + "\n");
    const nlohmann::json generation_config = {{"eos_token_id", eos}, {"temperature", 1.0}, {"top_p", 0.95}};
    write_text(dir / "generation_config.json", generation_config.dump(1) + "\n");
    MSA_LOG_INFO("wrote a random model to {} (vocab {}, eos {} = '{}')", dir.string(), vocab, eos, eos_text);
    return 0;
}

}  // namespace

void register_random_model_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<RandomModelOptions>();
    CLI::App* cmd = app.add_subcommand(
        "random-model", "Write a small model directory with random weights (for trying the server and for tests)");
    cmd->add_option("--out", o->out, "directory to write")->required();
    cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json to ship with it")->required();
    cmd->add_option("--chat-template", o->chat_template, "chat template (Jinja) to ship with it")->required();
    cmd->add_option("--seed", o->seed, "weight seed")->capture_default_str();
    cmd->add_option("--hidden-size", o->hidden, "hidden size")->capture_default_str();
    cmd->add_option("--vocab", o->vocab, "vocabulary rows (0: the tokenizer's ids, rounded up to 128)")
        ->capture_default_str();
    cmd->callback([o, &body] { body = [o] { return run_random_model(*o); }; });
}

}  // namespace msa::cli
