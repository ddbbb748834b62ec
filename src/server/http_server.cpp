#include "server/http_server.h"

#include "core/error.h"
#include "core/log.h"
#include "server/request_ids.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

namespace msa::server {

namespace {

using Clock = std::chrono::steady_clock;

// Per connection thread: when the current request started and its id, for the access log.
thread_local Clock::time_point tl_request_start;
thread_local bool tl_request_started = false;
thread_local std::string tl_request_id;
thread_local std::size_t tl_bytes_in = 0;  // request body bytes (read by our content reader, not httplib)

std::string numeric_host(const sockaddr_storage& addr, socklen_t len, int& port) {
    char host[NI_MAXHOST] = {};
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) !=
        0) {
        return {};
    }
    if (addr.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
    if (addr.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
    return host;
}

// The socket of a request's connection, found by its address pair among the process's descriptors. The connection
// thread is inside the handler while this runs, so the descriptor cannot be closed or reused meanwhile.
int find_connection_socket(const httplib::Request& req) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        const std::string name = entry.path().filename().string();
        int fd = -1;
        try {
            fd = std::stoi(name);
        } catch (...) {
            continue;
        }
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof(peer);
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
        sockaddr_storage local{};
        socklen_t local_len = sizeof(local);
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
        int peer_port = -1;
        int local_port = -1;
        if (numeric_host(peer, peer_len, peer_port) == req.remote_addr && peer_port == req.remote_port &&
            numeric_host(local, local_len, local_port) == req.local_addr && local_port == req.local_port) {
            return fd;
        }
    }
    return -1;
}

class SocketConnection final : public ClientConnection {
public:
    SocketConnection(const httplib::Request& req, const HttpServer& server) : req_(&req), server_(server) {}

    bool closed() const override {
        if (closed_) return true;
        if (!looked_up_) {
            fd_ = req_ != nullptr ? find_connection_socket(*req_) : -1;
            req_ = nullptr;  // the request object does not outlive the handler; only the descriptor is kept
            looked_up_ = true;
        }
        if (fd_ < 0) return false;
        pollfd p{fd_, POLLIN | POLLRDHUP, 0};
        if (poll(&p, 1, 0) <= 0) return false;
        if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
            closed_ = true;
        } else if ((p.revents & POLLIN) != 0) {
            char byte = 0;
            closed_ = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
        }
        return closed_;
    }
    bool cancelled() const override { return server_.cancelling() || closed(); }

    // Looks the socket up now, while the request is alive (streams poll later from the provider).
    void resolve() const { closed(); }

private:
    mutable const httplib::Request* req_;
    const HttpServer& server_;
    mutable int fd_ = -1;
    mutable bool looked_up_ = false;
    mutable bool closed_ = false;
};

bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

void apply(const HttpResponse& from, httplib::Response& to) {
    to.status = from.status;
    for (const auto& [k, v] : from.headers) to.set_header(k, v);
    if (!from.stream) to.set_content(from.body, from.content_type);
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
        if (k.size() == name.size() &&
            std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
            return v;
        }
    }
    return {};
}

HttpResponse HttpResponse::json(int status, const nlohmann::json& value) {
    HttpResponse r;
    r.status = status;
    r.body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
}

HttpResponse HttpResponse::error(const ApiError& error) { return json(error.status(), error.to_json()); }

HttpResponse HttpResponse::text(int status, std::string body, std::string content_type) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    r.content_type = std::move(content_type);
    return r;
}

HttpResponse HttpResponse::event_stream(std::shared_ptr<StreamBody> stream) {
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    r.stream = std::move(stream);
    return r;
}

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
    const std::size_t threads =
        options_.threads > 0 ? options_.threads : std::max<std::size_t>(64, 4 * std::thread::hardware_concurrency());
    server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_->set_keep_alive_timeout(options_.keep_alive_timeout_s);
    server_->set_keep_alive_max_count(options_.keep_alive_max_requests);
    server_->set_read_timeout(options_.read_timeout_s);
    server_->set_write_timeout(options_.write_timeout_s);
    server_->set_payload_max_length(options_.max_body_bytes);
    server_->set_tcp_nodelay(true);  // SSE writes are small; Nagle would hold them back
    server_->set_socket_options([this](socket_t sock) {
        // The library's default is SO_REUSEPORT, which lets a second server bind the same port silently.
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_fd_ = sock;
    });
    install_handlers();
}

HttpServer::~HttpServer() = default;

void HttpServer::install_handlers() {
    server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        tl_request_start = Clock::now();
        tl_request_started = true;
        tl_bytes_in = 0;
        tl_request_id = req.get_header_value("X-Request-Id");
        if (tl_request_id.empty() || tl_request_id.size() > 128) tl_request_id = random_hex(16);
        res.set_header("X-Request-Id", tl_request_id);
        if (!options_.allowed_origins.empty()) {
            const std::string origin = req.get_header_value("Origin");
            const bool any = std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(), "*") !=
                             options_.allowed_origins.end();
            if (any) {
                res.set_header("Access-Control-Allow-Origin", "*");
            } else if (!origin.empty() && std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                                                    origin) != options_.allowed_origins.end()) {
                res.set_header("Access-Control-Allow-Origin", origin);
                res.set_header("Vary", "Origin");
            }
            if (req.method == "OPTIONS") {
                res.status = 204;
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                res.set_header("Access-Control-Allow-Headers",
                               "Authorization, Content-Type, X-Request-Id, OpenAI-Organization, OpenAI-Project");
                res.set_header("Access-Control-Max-Age", "86400");
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    // Statuses the library sets itself (404 no route, 413 body too large, 400 unparsable request) get the JSON
    // envelope; responses of our handlers already carry one and are left alone.
    server_->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                           httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
        ApiError error = internal_error("The request could not be processed.");
        if (res.status == 404) {
            const bool other_method = std::any_of(routes_.begin(), routes_.end(),
                                                  [&](const auto& r) { return r.second == req.path; });
            error = other_method ? method_not_allowed(req.method, req.path)
                                 : not_found(fmt::format("There is no route {} {}.", req.method, req.path), {},
                                             "route_not_found");
            if (other_method) res.status = 405;
        } else if (res.status == 413) {
            error = payload_too_large(options_.max_body_bytes);
            res.set_header("Connection", "close");
        } else if (res.status == 400) {
            error = invalid_request("", "The HTTP request is malformed.");
        } else if (res.status == 414) {
            error = ApiError(414, "invalid_request_error", "The request URI is too long.");
        } else if (res.status >= 500) {
            error = internal_error("The request could not be processed.");
        } else {
            error = ApiError(res.status, "invalid_request_error", "The request could not be processed.");
        }
        res.set_content(error.body(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
    }));

    server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            MSA_LOG_ERROR("unhandled exception in an HTTP handler: {}", e.what());
        } catch (...) {
            MSA_LOG_ERROR("unhandled non-standard exception in an HTTP handler");
        }
        const auto error = internal_error("The server failed to process the request.");
        res.status = 500;
        res.set_content(error.body(), "application/json");
    });

    server_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        if (!options_.access_log) return;
        double ms = -1.0;
        if (tl_request_started) ms = std::chrono::duration<double, std::milli>(Clock::now() - tl_request_start).count();
        tl_request_started = false;
        MSA_LOG_INFO("access method={} path={} status={} remote={}:{} duration_ms={:.1f} request_id={} bytes_in={}",
                     req.method, req.path, res.status, req.remote_addr, req.remote_port, ms, tl_request_id,
                     tl_bytes_in);
    });
}

void HttpServer::get(const std::string& path, HttpHandler handler) { route("GET", path, std::move(handler)); }
void HttpServer::post(const std::string& path, HttpHandler handler) { route("POST", path, std::move(handler)); }

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
    routes_.emplace_back(method, path);
    // body: nullptr = take the body httplib read (GET); otherwise the body read through the content reader, or
    // nullopt when it exceeded the limit.
    auto serve = [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                      const std::optional<std::string>* body) {
        // Counted from here until the response (or the stream) is complete.
        auto in_flight = std::shared_ptr<void>(nullptr, [this](void*) { --in_flight_; });
        ++in_flight_;
        HttpRequest request;
        request.method = req.method;
        request.path = req.path;
        request.request_id = tl_request_id;
        request.remote = fmt::format("{}:{}", req.remote_addr, req.remote_port);
        for (const auto& [k, v] : req.headers) request.headers.emplace_back(k, v);
        auto connection = std::make_shared<SocketConnection>(req, *this);

        HttpResponse response;
        try {
            if (body != nullptr && !body->has_value()) throw payload_too_large(options_.max_body_bytes);
            request.body = body != nullptr ? **body : req.body;
            tl_bytes_in = request.body.size();
            const bool is_protected = std::any_of(options_.protected_prefixes.begin(), options_.protected_prefixes.end(),
                                                  [&](const std::string& p) { return req.path.starts_with(p); });
            if (draining_) {
                throw service_unavailable("The server is shutting down.");
            }
            if (options_.api_key && is_protected) {
                const std::string auth = req.get_header_value("Authorization");
                constexpr std::string_view kBearer = "Bearer ";
                const bool ok = auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
                                constant_time_equal(std::string_view(auth).substr(kBearer.size()), *options_.api_key);
                if (!ok) {
                    throw authentication_failed(auth.empty() ? "Missing API key: send 'Authorization: Bearer <key>'."
                                                             : "Incorrect API key provided.");
                }
            }
            response = handler(request, *connection);
        } catch (const ApiError& e) {
            response = HttpResponse::error(e);
        } catch (const std::exception& e) {
            MSA_LOG_ERROR("request {} {} failed: {}", req.method, req.path, e.what());
            response = HttpResponse::error(internal_error("The server failed to process the request."));
        }
        // Draining, or a body left unread on the connection: the client must not send more on it.
        if (draining_ || response.status == 413) response.headers.emplace_back("Connection", "close");
        apply(response, res);
        if (!response.stream) return;

        connection->resolve();
        auto completed = std::make_shared<bool>(false);
        auto stream = response.stream;
        res.set_chunked_content_provider(
            response.content_type,
            [stream, connection, completed, in_flight](std::size_t, httplib::DataSink& sink) {
                const auto write = [&sink](std::string_view bytes) { return sink.write(bytes.data(), bytes.size()); };
                if (!stream->next(write, *connection)) {
                    *completed = true;
                    sink.done();
                }
                return true;
            },
            [stream, completed, in_flight](bool success) {
                if (!success || !*completed) stream->on_abort();
            });
    };
    if (method == "GET") {
        server_->Get(path, [serve](const httplib::Request& req, httplib::Response& res) { serve(req, res, nullptr); });
    } else {
        // The body is read here, not by the library: its size limit does not cover chunked uploads.
        server_->Post(path, [this, serve](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
            std::optional<std::string> body(std::in_place);
            const bool read = reader([&](const char* data, std::size_t n) {
                if (body->size() + n > options_.max_body_bytes) {
                    body.reset();
                    return false;
                }
                body->append(data, n);
                return true;
            });
            if (!read && body) {
                // The library refuses a Content-Length above its payload limit before reading anything.
                const auto length = req.get_header_value_count("Content-Length") > 0
                                        ? std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10)
                                        : 0;
                if (length > options_.max_body_bytes) body.reset();
            }
            serve(req, res, &body);
        });
    }
}

void HttpServer::bind() {
    if (bound_) return;
    if (options_.port == 0) {
        port_ = server_->bind_to_any_port(options_.host);
        MSA_CHECK(port_ > 0, "Cannot bind to {} on any port: {}.", options_.host, std::strerror(errno));
    } else {
        MSA_CHECK(server_->bind_to_port(options_.host, options_.port), "Cannot listen on {}:{}: {}.", options_.host,
                  options_.port, errno != 0 ? std::strerror(errno) : "address unavailable");
        port_ = options_.port;
    }
    // The library listens with a compiled-in backlog of 5; listening again on the bound socket raises it.
    if (listen_fd_ >= 0 && ::listen(listen_fd_, options_.listen_backlog) != 0) {
        MSA_LOG_WARN("could not raise the listen backlog to {}: {}", options_.listen_backlog, std::strerror(errno));
    }
    bound_ = true;
}

void HttpServer::run() {
    bind();
    const bool clean = server_->listen_after_bind();
    if (!clean && !draining_) MSA_LOG_WARN("the HTTP listener stopped unexpectedly");
}

void HttpServer::shutdown(std::chrono::milliseconds deadline) {
    if (draining_.exchange(true)) return;
    // Stop accepting: the accept loop fails on the shut-down listener and ends; connections in progress keep
    // their threads until their requests complete.
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    const auto until = Clock::now() + deadline;
    while (in_flight_ > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (in_flight_ > 0) {
        MSA_LOG_WARN("shutdown deadline reached with {} requests in flight: cancelling them", in_flight_.load());
        cancelling_ = true;
        const auto grace = Clock::now() + std::chrono::seconds(5);
        while (in_flight_ > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

void HttpServer::stop() {
    draining_ = true;
    cancelling_ = true;
    // httplib's stop() does nothing when its accept loop has not started yet, which then runs forever; shutting
    // the listener down makes that loop end at once whenever it starts.
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    server_->stop();
}

struct SignalWatcher::Impl {
    sigset_t set{};
    std::thread thread;
    int pipe_fds[2] = {-1, -1};
};

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal) : impl_(std::make_unique<Impl>()) {
    sigemptyset(&impl_->set);
    sigaddset(&impl_->set, SIGTERM);
    sigaddset(&impl_->set, SIGINT);
    sigaddset(&impl_->set, SIGUSR2);  // used to wake the watcher when it is destroyed
    MSA_CHECK(pthread_sigmask(SIG_BLOCK, &impl_->set, nullptr) == 0, "Cannot block termination signals.");
    impl_->thread = std::thread([set = impl_->set, on_signal = std::move(on_signal)] {
        while (true) {
            int signal = 0;
            if (sigwait(&set, &signal) != 0) return;
            if (signal == SIGUSR2) return;
            on_signal(signal);
        }
    });
}

SignalWatcher::~SignalWatcher() {
    pthread_kill(impl_->thread.native_handle(), SIGUSR2);
    impl_->thread.join();
}

}  // namespace msa::server
