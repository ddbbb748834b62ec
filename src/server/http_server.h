// The HTTP layer: a thin wrapper over cpp-httplib 0.11 (Debian) that adds what a serving engine needs and the
// library lacks or gets wrong by default (deps.md section 1.1):
//  - a large, configurable thread pool (one pool thread per open connection: SSE clients hold theirs);
//  - the listen backlog raised from the compiled-in 5 by listening again on the bound socket;
//  - SO_REUSEADDR instead of the library's SO_REUSEPORT, so a second server on a busy port fails to start;
//  - a request body limit answered with 413 and the JSON error envelope, 404/405 envelopes, a 500 envelope for
//    anything thrown (never a stack trace);
//  - the API key check (401 envelope) on protected paths, CORS, request ids, a structured access log;
//  - streaming bodies that learn at once when the client went away (the peer's socket is polled, so no write is
//    needed to notice), delivered as an abort callback;
//  - graceful shutdown: stop accepting, let requests in flight finish until a deadline, then cancel them.
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace msa::server {

struct HttpServerOptions {
    std::string host = "0.0.0.0";
    int port = 8000;                       // 0: any free port (see HttpServer::port())
    std::size_t threads = 0;               // connection threads; 0 = max(64, 4 * hardware threads)
    int listen_backlog = 1024;
    std::size_t max_body_bytes = 64u << 20;
    std::optional<std::string> api_key;    // required as "Authorization: Bearer KEY" on protected paths
    std::vector<std::string> protected_prefixes = {"/v1/", "/tokenize", "/detokenize"};
    std::vector<std::string> allowed_origins = {"*"};  // CORS; empty = no CORS headers
    int keep_alive_timeout_s = 10;
    std::size_t keep_alive_max_requests = 1000;
    int read_timeout_s = 60;
    int write_timeout_s = 60;
    bool access_log = true;
};

struct HttpRequest {
    std::string method;
    std::string path;
    std::string body;
    std::string request_id;                // X-Request-Id from the client, or generated
    std::string remote;                    // "addr:port"
    std::vector<std::pair<std::string, std::string>> headers;
    // The first value of a header (case-insensitive name), "" when absent.
    std::string header(std::string_view name) const;
};

// The client's connection as a handler sees it while it works.
class ClientConnection {
public:
    virtual ~ClientConnection() = default;
    // True once the client closed its side of the connection (checked without writing).
    virtual bool closed() const = 0;
    // True when the work should stop: the client is gone, or the server is shutting down past its deadline.
    virtual bool cancelled() const = 0;
};

// A response body produced while it is sent (Server-Sent Events).
class StreamBody {
public:
    virtual ~StreamBody() = default;
    // Called again and again on the connection's thread: write what is ready through `write` (which returns
    // false once the client is gone), waiting briefly when nothing is; return false when the body is complete.
    virtual bool next(const std::function<bool(std::string_view)>& write, const ClientConnection& connection) = 0;
    // The body ended before next() returned false: client gone, a write failed, or the server stopped it.
    // Called once, possibly from another thread than next().
    virtual void on_abort() = 0;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::shared_ptr<StreamBody> stream;    // set: the body is streamed (chunked) instead of `body`

    static HttpResponse json(int status, const nlohmann::json& value);
    static HttpResponse error(const ApiError& error);
    static HttpResponse text(int status, std::string body, std::string content_type);
    static HttpResponse event_stream(std::shared_ptr<StreamBody> stream);
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&, const ClientConnection&)>;

class HttpServer {
public:
    explicit HttpServer(HttpServerOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    void get(const std::string& path, HttpHandler handler);
    void post(const std::string& path, HttpHandler handler);

    // Binds the port (throws msa::Error when it cannot) and raises the listen backlog.
    void bind();
    // The bound port (after bind()).
    int port() const { return port_; }
    // Serves until shutdown() or stop(); binds first if bind() was not called.
    void run();

    // Graceful shutdown, from any thread: stop accepting connections, answer new requests on open connections
    // with 503, wait for requests in flight until `deadline`, then cancel the rest (streams end with an error
    // event), and stop. Returns when run() can return.
    void shutdown(std::chrono::milliseconds deadline);
    // Immediate stop (tests).
    void stop();

    std::size_t in_flight() const { return in_flight_.load(); }
    bool draining() const { return draining_.load(); }
    bool cancelling() const { return cancelling_.load(); }

private:
    void install_handlers();
    void route(const std::string& method, const std::string& path, HttpHandler handler);

    HttpServerOptions options_;
    std::unique_ptr<httplib::Server> server_;
    std::vector<std::pair<std::string, std::string>> routes_;  // (method, path) for 405 detection
    int listen_fd_ = -1;
    int port_ = 0;
    bool bound_ = false;
    std::atomic<std::size_t> in_flight_{0};
    std::atomic<bool> draining_{false};
    std::atomic<bool> cancelling_{false};
};

// Blocks SIGTERM and SIGINT in the calling thread (call before any thread starts, so that every thread inherits
// it) and runs `on_signal` on a dedicated thread when one arrives. Returns the watcher; destroying it stops
// watching.
class SignalWatcher {
public:
    explicit SignalWatcher(std::function<void(int signal)> on_signal);
    ~SignalWatcher();
    SignalWatcher(const SignalWatcher&) = delete;
    SignalWatcher& operator=(const SignalWatcher&) = delete;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace msa::server
