// `msa serve [--model DIR]`: the OpenAI-compatible server (docs/serving.md). Loads the model directory (weights,
// tokenizer, chat template, generation defaults) with a progress bar on a terminal, starts the engine, and serves
// the routes of src/server over HTTP until SIGTERM/SIGINT, which drains requests in flight before exiting.
// Flag names follow vLLM's `vllm serve` where vLLM has the flag.
#include "cli/commands.h"
#include "cli/engine_cli.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/cpu_model_executor.h"
#include "engine/engine.h"
#include "engine/model_bundle.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "server/openai_routes.h"
#include "server/serving_metrics.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace msa::cli {
namespace {

struct ServeOptions {
    EngineFlags engine;  // --model, KV cache, numerics, threads, --max-model-len, --max-num-batched-tokens
    std::string host = "0.0.0.0";
    int port = 8000;
    std::string api_key;
    std::string served_model_name;
    int max_num_seqs = 256;
    std::string reasoning_parser;
    std::string tool_call_parser;
    bool enable_auto_tool_choice = false;
    std::string default_chat_template_kwargs;
    int max_queued_requests = 1024;
    int max_n = 64;
    std::size_t max_request_body_bytes = 64u << 20;
    std::size_t http_threads = 0;
    int listen_backlog = 1024;
    int keep_alive_timeout = 10;
    double shutdown_timeout = 30.0;
    std::vector<std::string> allowed_origins = {"*"};
    bool disable_access_log = false;
};

// A stage-by-stage bar on stderr while the model loads, redrawn with the elapsed time; nothing when stderr is not
// a terminal (logs stay clean).
class LoadProgress {
public:
    explicit LoadProgress(int stages) : stages_(stages), tty_(isatty(STDERR_FILENO) != 0) {
        if (tty_) thread_ = std::thread([this] { loop(); });
    }
    ~LoadProgress() { finish(); }

    void stage(const std::string& label) {
        std::lock_guard lock(mu_);
        if (!label_.empty()) ++done_;
        label_ = label;
        if (!tty_) MSA_LOG_INFO("loading: {}", label);
    }
    void finish() {
        {
            std::lock_guard lock(mu_);
            if (stopped_) return;
            stopped_ = true;
            done_ = stages_;
            label_ = "ready";
        }
        cv_.notify_all();
        if (thread_.joinable()) {
            thread_.join();
            draw();
            std::fputc('\n', stderr);
        }
    }

private:
    void loop() {
        std::unique_lock lock(mu_);
        while (!stopped_) {
            lock.unlock();
            draw();
            lock.lock();
            cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopped_; });
        }
    }
    void draw() {
        std::lock_guard lock(mu_);
        constexpr int kWidth = 30;
        const int filled = stages_ == 0 ? kWidth : done_ * kWidth / stages_;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        std::fprintf(stderr, "\r\033[Kloading [%s%s] %d/%d %s  %.1fs", std::string(filled, '#').c_str(),
                     std::string(kWidth - filled, '.').c_str(), done_, stages_, label_.c_str(), seconds);
        std::fflush(stderr);
    }

    const int stages_;
    const bool tty_;
    const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    std::mutex mu_;
    std::condition_variable cv_;
    int done_ = 0;
    std::string label_;
    bool stopped_ = false;
    std::thread thread_;
};

nlohmann::json parse_template_kwargs(const std::string& text) {
    if (text.empty()) return nlohmann::json::object();
    auto doc = nlohmann::json::parse(text, nullptr, false);
    MSA_CHECK(!doc.is_discarded() && doc.is_object(),
              "--default-chat-template-kwargs must be a JSON object, e.g. '{{\"thinking_mode\": \"disabled\"}}', got "
              "'{}'",
              text);
    return doc;
}

int run_serve(const ServeOptions& o) {
    // Block SIGTERM/SIGINT before any thread starts so that every thread inherits the mask and only the watcher
    // sees them.
    server::HttpServer* running = nullptr;
    std::mutex running_mu;
    std::atomic<bool> stop_requested{false};
    const auto grace = std::chrono::milliseconds(static_cast<std::int64_t>(o.shutdown_timeout * 1000));
    server::SignalWatcher signals([&](int signal) {
        MSA_LOG_INFO("received {}, shutting down (up to {:.0f} s for requests in flight)",
                     signal == SIGTERM ? "SIGTERM" : "SIGINT", o.shutdown_timeout);
        stop_requested = true;
        std::lock_guard lock(running_mu);
        if (running) running->shutdown(grace);
    });

    MSA_CHECK(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got {}", o.port);
    MSA_CHECK(o.max_num_seqs > 0, "--max-num-seqs must be positive, got {}", o.max_num_seqs);
    MSA_CHECK(o.max_queued_requests >= 0, "--max-queued-requests must not be negative");
    MSA_CHECK(o.shutdown_timeout >= 0, "--shutdown-timeout must not be negative");
    for (const auto* parser : {&o.reasoning_parser, &o.tool_call_parser}) {
        MSA_CHECK(parser->empty() || *parser == "minimax_m3" || *parser == "minimax_m2",
                  "unknown parser '{}': the parsers are minimax_m3 and minimax_m2", *parser);
    }
    const nlohmann::json template_kwargs = parse_template_kwargs(o.default_chat_template_kwargs);

    LoadProgress progress(4);
    progress.stage("model directory");
    const auto dir = resolve_model_dir(o.engine.model.model_dir);
    ModelBundle bundle = load_model_bundle(dir);
    MSA_CHECK(bundle.tokenizer, "{} has no tokenizer.json: the server needs one", dir.string());
    MSA_CHECK(bundle.chat_template, "{} has no chat template (chat_template.jinja or tokenizer_config.json)",
              dir.string());

    progress.stage("weights");
    auto model = load_cpu_model_executor(dir, executor_options(o.engine));

    progress.stage("engine");
    server::MarkerTextSource text(*bundle.text, *bundle.tokenizer, server::parser_marker_tokens());
    EngineConfig ec;
    ec.scheduler.max_num_seqs = o.max_num_seqs;
    ec.scheduler.max_num_batched_tokens = o.engine.max_num_batched_tokens;
    ec.scheduler.enable_prefix_caching = !o.engine.no_prefix_caching;
    ec.max_waiting_requests = o.max_queued_requests;
    ec.max_n = o.max_n;
    ec.eos_token_ids = bundle.eos_token_ids;
    std::unique_ptr<Drafter> drafter;  // outlives the engine
    if (const auto spec = speculative_settings(o.engine, dir)) drafter = load_drafter(*spec, dir, ec);
    Engine engine(ec, *model, &text, drafter.get());

    progress.stage("HTTP server");
    server::EngineBackendOptions bo;
    bo.served_name = o.served_model_name.empty() ? bundle.name : o.served_model_name;
    bo.root = std::filesystem::absolute(dir).string();
    bo.created = static_cast<std::int64_t>(std::time(nullptr));
    bo.defaults = bundle.generation.sampling_params();
    server::EngineBackend backend(engine, *bundle.tokenizer, *bundle.chat_template, text, bo);
    server::ServingMetrics metrics(bo.served_name, [&] { return backend.stats(); });
    server::ServingOptions so;
    so.reasoning_parser = o.reasoning_parser;
    so.tool_call_parser = o.tool_call_parser;
    so.default_chat_template_kwargs = template_kwargs;
    so.limits.max_n = o.max_n;
    server::OpenAIRoutes routes(backend, metrics, so);

    server::HttpServerOptions ho;
    ho.host = o.host;
    ho.port = o.port;
    ho.threads = o.http_threads;
    ho.listen_backlog = o.listen_backlog;
    ho.max_body_bytes = o.max_request_body_bytes;
    if (!o.api_key.empty()) ho.api_key = o.api_key;
    ho.allowed_origins = o.allowed_origins;
    ho.keep_alive_timeout_s = o.keep_alive_timeout;
    ho.access_log = !o.disable_access_log;
    server::HttpServer http(ho);
    routes.register_routes(http);
    http.bind();
    progress.finish();

    const auto max_len = engine.config().scheduler.max_model_len;
    MSA_LOG_INFO("serving {} ({}) on http://{}:{} : max_model_len {}, {} KV pages of {} tokens, max_num_seqs {}",
                 bo.served_name, bo.root, o.host, http.port(), max_len, model->num_kv_pages(), model->page_size(),
                 o.max_num_seqs);
    {
        std::lock_guard lock(running_mu);
        running = &http;
        if (stop_requested) http.shutdown(grace);
    }
    http.run();
    {
        std::lock_guard lock(running_mu);
        running = nullptr;
    }
    engine.shutdown();
    MSA_LOG_INFO("server stopped");
    return 0;
}

}  // namespace

void register_serve_command(CLI::App& app, CommandBody& body) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand("serve", "Serve a model over the OpenAI-compatible HTTP API");
    cmd->footer(
        "Endpoints: /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics, /tokenize, /detokenize.\n"
        "See docs/serving.md for the request fields, streaming, reasoning and tool calls.");
    add_engine_flags(*cmd, o->engine);
    cmd->add_option("--served-model-name", o->served_model_name,
                    "the model id clients send and /v1/models lists (default: the directory's name)");
    cmd->add_option("--max-num-seqs", o->max_num_seqs, "sequences decoded together at most (the running batch)")
        ->capture_default_str();
    cmd->add_option("--max-queued-requests", o->max_queued_requests,
                    "sequences waiting for a slot at most; beyond it requests get 429")
        ->capture_default_str();
    cmd->add_option("--max-n", o->max_n, "largest `n` (choices per request) accepted")
        ->capture_default_str();

    cmd->add_option("--reasoning-parser", o->reasoning_parser,
                    "split reasoning into reasoning_content: minimax_m3 (<mm:think>) or minimax_m2 (<think>)");
    cmd->add_option("--tool-call-parser", o->tool_call_parser,
                    "parse tool calls into tool_calls: minimax_m3 or minimax_m2");
    cmd->add_flag("--enable-auto-tool-choice", o->enable_auto_tool_choice,
                  "accepted for vLLM compatibility: tool_choice auto is on whenever --tool-call-parser is set");
    cmd->add_option("--default-chat-template-kwargs", o->default_chat_template_kwargs,
                    "JSON object of chat_template_kwargs applied when a request does not set them, e.g. "
                    "'{\"thinking_mode\": \"disabled\"}'");

    cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", o->port, "port to listen on (0: any free port, printed at start)")
        ->capture_default_str();
    cmd->add_option("--api-key", o->api_key,
                    "require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize (env MSA_API_KEY)")
        ->envname("MSA_API_KEY");
    cmd->add_option("--max-request-body-bytes", o->max_request_body_bytes, "larger request bodies get 413")
        ->capture_default_str();
    cmd->add_option("--http-threads", o->http_threads,
                    "connection threads, i.e. concurrent connections served (0: max(64, 4 x cores))")
        ->capture_default_str();
    cmd->add_option("--listen-backlog", o->listen_backlog, "pending connections the kernel queues")
        ->capture_default_str();
    cmd->add_option("--keep-alive-timeout", o->keep_alive_timeout, "seconds an idle keep-alive connection stays open")
        ->capture_default_str();
    cmd->add_option("--allowed-origins", o->allowed_origins, "CORS origins (none: no CORS headers)")
        ->capture_default_str();
    cmd->add_option("--shutdown-timeout", o->shutdown_timeout,
                    "seconds requests in flight get to finish after SIGTERM/SIGINT before they are cancelled")
        ->capture_default_str();
    cmd->add_flag("--disable-access-log", o->disable_access_log, "no access log line per request");

    cmd->callback([o, &body] { body = [o] { return run_serve(*o); }; });
}

}  // namespace msa::cli
