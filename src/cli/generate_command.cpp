// `msa generate [--model DIR]`: continues a prompt through the Engine and streams the continuation to stdout as it
// is generated, with the speed on stderr. The prompt is text (--prompt, else stdin) tokenized with the model's
// tokenizer.json, optionally wrapped as one user turn of the chat template (--chat); with --ids (or --prompt-ids)
// prompt and output are token ids instead. Sampling defaults come from generation_config.json; the flags override.
#include "cli/commands.h"
#include "cli/engine_cli.h"
#include "cli/model_cli.h"
#include "core/error.h"

#include <cstdio>

namespace msa::cli {
namespace {

constexpr std::int32_t kDefaultMaxTokens = 256;

struct GenerateOptions {
    EngineFlags engine;
    SamplingFlags sampling;
    std::string prompt;
    std::string prompt_ids;
    bool ids = false;
    bool chat = false;
    std::string system;
};

std::vector<std::int32_t> prompt_tokens(const GenerateOptions& o, const ModelBundle& bundle) {
    if (!o.prompt_ids.empty()) return parse_token_ids(o.prompt_ids, "--prompt-ids");
    const std::string text = o.prompt.empty() ? read_all("-") : o.prompt;
    const char* source = o.prompt.empty() ? "stdin" : "--prompt";
    if (o.ids) return parse_token_ids(text, source);
    MSA_CHECK(bundle.tokenizer != nullptr, "{} has no tokenizer.json: give the prompt as token ids with --ids",
              bundle.dir.string());
    if (!o.chat) return bundle.tokenizer->encode(text, /*add_special_tokens=*/true);
    MSA_CHECK(bundle.chat_template != nullptr, "{} has no chat template (--chat needs one)", bundle.dir.string());
    ChatRequest request;
    if (!o.system.empty()) request.messages.push_back({{"role", "system"}, {"content", o.system}});
    request.messages.push_back({{"role", "user"}, {"content", text}});
    // The template writes BOS itself when it wants one.
    return bundle.tokenizer->encode(bundle.chat_template->render(request), /*add_special_tokens=*/false);
}

int run_generate(const GenerateOptions& o) {
    auto loaded = load_engine(o.engine);
    const ModelBundle& bundle = loaded->bundle;
    const bool ids_out = o.ids || !o.prompt_ids.empty() || bundle.tokenizer == nullptr;
    const auto prompt = prompt_tokens(o, bundle);
    MSA_CHECK(!prompt.empty(), "the prompt is empty");

    GenerateRequest request;
    request.prompt = prompt;
    request.params = sampling_params(o.sampling, bundle.generation, kDefaultMaxTokens);
    if (ids_out && !request.params.stop.empty()) {
        MSA_CHECK(bundle.tokenizer != nullptr, "--stop needs a tokenizer.json; use --stop-ids");
    }
    auto handle = loaded->engine->submit(std::move(request));
    bool first = true;
    while (auto event = handle->next()) {
        for (const SampleDelta& d : event->samples) {
            if (ids_out) {
                for (const std::int32_t id : d.token_ids) {
                    std::printf(first ? "%d" : " %d", id);
                    first = false;
                }
            } else {
                std::fwrite(d.text.data(), 1, d.text.size(), stdout);
            }
        }
        std::fflush(stdout);
        if (event->finished) {
            std::printf("\n");
            std::fflush(stdout);  // the newline before the figures on stderr
            MSA_CHECK(event->error.empty(), "generation failed: {}", event->error);
            print_request_speed(*event, static_cast<std::int32_t>(prompt.size()));
            print_speculative_stats(loaded->engine->stats());
        }
    }
    return 0;
}

}  // namespace

void register_generate_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App* cmd = app.add_subcommand(
        "generate", "Continue a prompt (text, or token ids with --ids) and stream the continuation to stdout");
    add_engine_flags(*cmd, o->engine);
    cmd->add_option("--prompt,-p", o->prompt, "the prompt (default: read from stdin)");
    cmd->add_flag("--ids", o->ids, "the prompt is token ids (\"1 2 3\") and the output is token ids");
    cmd->add_option("--prompt-ids", o->prompt_ids, "prompt token ids, e.g. \"1 2 3\" (implies --ids)");
    cmd->add_flag("--chat", o->chat, "render the prompt as one user turn of the model's chat template");
    cmd->add_option("--system", o->system, "system message for --chat");
    add_sampling_flags(*cmd, o->sampling, kDefaultMaxTokens);
    cmd->callback([o, &body] { body = [o] { return run_generate(*o); }; });
}

}  // namespace msa::cli
