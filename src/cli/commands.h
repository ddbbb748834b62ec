// Each subcommand of `msa` lives in its own file and registers itself through one function declared here.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace msa::cli {

// A subcommand's body; returns the process exit code. Throwing msa::Error prints one line and exits with 1.
using CommandBody = std::function<int()>;

// `msa info MODEL_DIR` (info_command.cpp).
void register_info_command(CLI::App& app, CommandBody& body);
// `msa generate --model DIR` (generate_command.cpp).
void register_generate_command(CLI::App& app, CommandBody& body);
// `msa chat [--model DIR]` (chat_command.cpp).
void register_chat_command(CLI::App& app, CommandBody& body);
// `msa score --model DIR` (score_command.cpp).
void register_score_command(CLI::App& app, CommandBody& body);
// `msa serve [--model DIR]` (serve_command.cpp).
void register_serve_command(CLI::App& app, CommandBody& body);
// `msa random-model --out DIR` (random_model_command.cpp).
void register_random_model_command(CLI::App& app, CommandBody& body);

}  // namespace msa::cli
