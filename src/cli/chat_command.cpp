// `msa chat [--model DIR]`: an interactive, streaming chat in the terminal. Each line read from stdin is a user turn;
// the conversation so far is rendered with the model's chat template, tokenized and sent to the Engine, and the
// reply streams to stdout as it is generated (the speed goes to stderr). The prefix cache makes later turns cheap:
// the pages of the earlier turns are reused. Commands: /reset (forget the conversation), /exit (or end of input).
#include "cli/commands.h"
#include "cli/engine_cli.h"
#include "core/error.h"
#include "engine/request_error.h"

#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace msa::cli {
namespace {

constexpr std::int32_t kDefaultMaxTokens = 1024;

struct ChatOptions {
    EngineFlags engine;
    SamplingFlags sampling;
    std::string system;
    std::string template_kwargs = "{}";
    bool quiet = false;
};

// Streams one reply to stdout; returns its text, or nullopt when the engine refused the request.
std::optional<std::string> reply(LoadedEngine& loaded, const std::vector<std::int32_t>& prompt,
                                 const SamplingParams& params, bool quiet) {
    std::shared_ptr<RequestHandle> handle;
    try {
        handle = loaded.engine->submit({.prompt = prompt, .params = params});
    } catch (const RequestError& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return std::nullopt;
    }
    std::string text;
    while (auto event = handle->next()) {
        for (const SampleDelta& d : event->samples) {
            std::fwrite(d.text.data(), 1, d.text.size(), stdout);
            text += d.text;
        }
        std::fflush(stdout);
        if (event->finished) {
            std::printf("\n");
            std::fflush(stdout);
            if (!event->error.empty()) {
                std::fprintf(stderr, "error: %s\n", event->error.c_str());
                return std::nullopt;
            }
            if (!quiet) print_request_speed(*event, static_cast<std::int32_t>(prompt.size()));
        }
    }
    return text;
}

int run_chat(const ChatOptions& o) {
    auto loaded = load_engine(o.engine);
    const ModelBundle& bundle = loaded->bundle;
    MSA_CHECK(bundle.tokenizer != nullptr, "{} has no tokenizer.json, which chat needs", bundle.dir.string());
    MSA_CHECK(bundle.chat_template != nullptr, "{} has no chat template (chat_template.jinja or "
              "tokenizer_config.json's chat_template), which chat needs", bundle.dir.string());
    const auto kwargs = nlohmann::ordered_json::parse(o.template_kwargs, nullptr, /*allow_exceptions=*/false);
    MSA_CHECK(kwargs.is_object(), "--template-kwargs must be a JSON object, got '{}'", o.template_kwargs);
    const SamplingParams params = sampling_params(o.sampling, bundle.generation, kDefaultMaxTokens);
    const bool interactive = ::isatty(STDIN_FILENO) != 0;
    if (interactive) {
        std::fprintf(stderr, "msa chat: %s (type /reset to start over, /exit or Ctrl-D to quit)\n",
                     bundle.name.c_str());
    }

    ChatRequest request;
    request.template_kwargs = kwargs;
    auto reset = [&] {
        request.messages = nlohmann::ordered_json::array();
        if (!o.system.empty()) request.messages.push_back({{"role", "system"}, {"content", o.system}});
    };
    reset();
    std::string line;
    while (true) {
        if (interactive) std::fputs("> ", stderr);
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            reset();
            if (interactive) std::fputs("(conversation reset)\n", stderr);
            continue;
        }
        if (line.empty()) continue;
        request.messages.push_back({{"role", "user"}, {"content", line}});
        std::vector<std::int32_t> prompt;
        try {
            prompt = bundle.tokenizer->encode(bundle.chat_template->render(request), /*add_special_tokens=*/false);
        } catch (const Error& e) {  // a template that rejects the conversation, invalid UTF-8 input
            std::fprintf(stderr, "error: %s\n", e.what());
            request.messages.erase(request.messages.size() - 1);
            continue;
        }
        const auto text = reply(*loaded, prompt, params, o.quiet);
        if (!text) {  // refused (e.g. the conversation outgrew the context): drop the turn, keep the history
            request.messages.erase(request.messages.size() - 1);
            continue;
        }
        request.messages.push_back({{"role", "assistant"}, {"content", *text}});
    }
    return 0;
}

}  // namespace

void register_chat_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<ChatOptions>();
    CLI::App* cmd = app.add_subcommand(
        "chat", "Interactive streaming chat: one user turn per input line; /reset starts over, /exit quits");
    add_engine_flags(*cmd, o->engine);
    cmd->add_option("--system", o->system, "system message at the start of the conversation");
    cmd->add_option("--template-kwargs", o->template_kwargs,
                    "JSON object of chat template variables, e.g. '{\"thinking_mode\": \"disabled\"}'");
    cmd->add_flag("--quiet,-q", o->quiet, "no speed figures on stderr");
    add_sampling_flags(*cmd, o->sampling, kDefaultMaxTokens);
    cmd->callback([o, &body] { body = [o] { return run_chat(*o); }; });
}

}  // namespace msa::cli
