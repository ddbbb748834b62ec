// `msa`: the command-line entry point. Parses flags, dispatches to one subcommand, and turns errors into one clear
// line on stderr with a non-zero exit status.
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    CLI::App app{"MSA Engine: a C++ serving engine for MiniMax-M3-family models"};
    app.set_version_flag("--version", MSA_VERSION);
    app.require_subcommand(0, 1);
    std::string log_level = "info";
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->capture_default_str();

    msa::cli::CommandBody body;
    msa::cli::register_info_command(app, body);
    msa::cli::register_generate_command(app, body);
    msa::cli::register_chat_command(app, body);
    msa::cli::register_score_command(app, body);
    msa::cli::register_serve_command(app, body);
    msa::cli::register_random_model_command(app, body);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        msa::set_log_level(msa::parse_log_level(log_level));
        if (!body) {
            std::fputs(app.help().c_str(), stdout);
            return 0;
        }
        return body();
    } catch (const msa::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "internal error: %s\n", e.what());
        return 2;
    }
}
