#include "server/http_server.h"

#include "test_server.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

namespace msa::server {
namespace {

using testing::RunningServer;

using nlohmann::json;
using namespace std::chrono_literals;

// Sends raw bytes on a new connection and returns everything the server answers until it closes or times out.
std::string raw_exchange(int port, const std::string& bytes) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(fd);
        return "<connect failed>";
    }
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)!write(fd, bytes.data(), bytes.size());
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<std::size_t>(n));
    close(fd);
    return out;
}

void expect_envelope(const std::string& body, int status, const std::string& type) {
    const json j = json::parse(body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << body;
    ASSERT_TRUE(j.contains("error")) << body;
    EXPECT_EQ(j["error"]["type"], type) << body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
    (void)status;
}

void add_basic_routes(HttpServer& s) {
    s.get("/health", [](const HttpRequest&, const ClientConnection&) { return HttpResponse::json(200, json::object()); });
    s.post("/v1/echo", [](const HttpRequest& r, const ClientConnection&) {
        return HttpResponse::json(200, {{"body", r.body}, {"request_id", r.request_id}});
    });
    s.post("/v1/fail", [](const HttpRequest&, const ClientConnection&) -> HttpResponse {
        throw invalid_request("temperature", "bad temperature");
    });
    s.post("/v1/crash", [](const HttpRequest&, const ClientConnection&) -> HttpResponse {
        throw std::runtime_error("secret internal detail /home/x");
    });
}

TEST(HttpServer, RoutesErrorsAndEnvelopes) {
    RunningServer srv({}, add_basic_routes);
    auto c = srv.client();
    auto r = c.Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);

    r = c.Get("/nope");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    expect_envelope(r->body, 404, "not_found_error");

    r = c.Get("/v1/echo");  // exists for POST only
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    expect_envelope(r->body, 405, "invalid_request_error");

    r = c.Post("/v1/fail", "{}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "temperature");

    r = c.Post("/v1/crash", "{}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    expect_envelope(r->body, 500, "server_error");
    EXPECT_EQ(r->body.find("secret"), std::string::npos);

    // The request id is echoed (or made up).
    httplib::Headers headers = {{"X-Request-Id", "abc-123"}};
    r = c.Post("/v1/echo", headers, "x", "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("X-Request-Id"), "abc-123");
    EXPECT_EQ(json::parse(r->body)["request_id"], "abc-123");
    r = c.Post("/v1/echo", "x", "text/plain");
    EXPECT_EQ(r->get_header_value("X-Request-Id").size(), 16u);
}

TEST(HttpServer, MalformedHttpGetsAnEnvelope) {
    RunningServer srv({}, add_basic_routes);
    const std::string reply = raw_exchange(srv.port(), "THIS IS NOT HTTP\r\n\r\n");
    ASSERT_TRUE(reply.starts_with("HTTP/1.1 400")) << reply;
    expect_envelope(reply.substr(reply.find("\r\n\r\n") + 4), 400, "invalid_request_error");
}

TEST(HttpServer, BodyLimitIs413WithEnvelope) {
    HttpServerOptions options;
    options.max_body_bytes = 1024;
    RunningServer srv(options, add_basic_routes);
    auto c = srv.client();
    auto r = c.Post("/v1/echo", std::string(1000, 'a'), "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    r = c.Post("/v1/echo", std::string(4096, 'a'), "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    expect_envelope(r->body, 413, "invalid_request_error");
    // The unread body makes the connection unusable: the client is told to close it.
    EXPECT_EQ(r->get_header_value("Connection"), "close");
    // Chunked bodies are limited too.
    const std::string chunked = "POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                "800\r\n" + std::string(0x800, 'b') + "\r\n0\r\n\r\n";
    const std::string reply = raw_exchange(srv.port(), chunked);
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 413")) << reply.substr(0, 200);
}

TEST(HttpServer, ApiKeyGuardsProtectedPathsOnly) {
    HttpServerOptions options;
    options.api_key = "sk-test";
    RunningServer srv(options, add_basic_routes);
    auto c = srv.client();
    auto r = c.Post("/v1/echo", "x", "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    expect_envelope(r->body, 401, "authentication_error");
    r = c.Post("/v1/echo", {{"Authorization", "Bearer wrong"}}, "x", "text/plain");
    EXPECT_EQ(r->status, 401);
    r = c.Post("/v1/echo", {{"Authorization", "Bearer sk-test"}}, "x", "text/plain");
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(c.Get("/health")->status, 200);
    // The connection stays usable after a 401 (the body was read).
    r = c.Post("/v1/echo", {{"Authorization", "Bearer sk-test"}}, "y", "text/plain");
    EXPECT_EQ(json::parse(r->body)["body"], "y");
}

TEST(HttpServer, CorsPreflight) {
    RunningServer srv({}, add_basic_routes);
    const std::string reply =
        raw_exchange(srv.port(), "OPTIONS /v1/echo HTTP/1.1\r\nHost: x\r\nOrigin: http://ui\r\n"
                                 "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n");
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 204")) << reply;
    EXPECT_NE(reply.find("Access-Control-Allow-Origin: *"), std::string::npos);
    EXPECT_NE(reply.find("Authorization"), std::string::npos);
}

// A stream of numbered events that ends after `count`, or never when count < 0.
class CountingStream final : public StreamBody {
public:
    explicit CountingStream(int count) : count_(count) {}
    bool next(const std::function<bool(std::string_view)>& write, const ClientConnection& conn) override {
        if (conn.cancelled()) {
            saw_cancel = true;
            write("data: cancelled\n\n");
            return false;
        }
        if (count_ >= 0 && sent_ >= count_) return false;
        std::this_thread::sleep_for(20ms);
        if (!write("data: " + std::to_string(sent_++) + "\n\n")) return true;
        return true;
    }
    void on_abort() override { aborted = true; }

    std::atomic<bool> aborted{false};
    std::atomic<bool> saw_cancel{false};

private:
    int count_;
    int sent_ = 0;
};

TEST(HttpServer, StreamsChunkedEvents) {
    auto stream = std::make_shared<CountingStream>(5);
    RunningServer srv({}, [&](HttpServer& s) {
        s.get("/stream", [&](const HttpRequest&, const ClientConnection&) { return HttpResponse::event_stream(stream); });
    });
    auto c = srv.client();
    std::string received;
    auto r = c.Get("/stream", [&](const char* data, std::size_t n) {
        received.append(data, n);
        return true;
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    EXPECT_EQ(received, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
    EXPECT_FALSE(stream->aborted);
}

// Writes one event, then nothing until it is cancelled: only the socket poll can notice the client leaving.
class QuietStream final : public StreamBody {
public:
    bool next(const std::function<bool(std::string_view)>& write, const ClientConnection& conn) override {
        if (!started_) {
            started_ = true;
            write("data: hello\n\n");
            return true;
        }
        if (conn.cancelled()) {
            saw_cancel = true;
            return false;
        }
        std::this_thread::sleep_for(10ms);
        return true;
    }
    void on_abort() override { aborted = true; }

    std::atomic<bool> aborted{false};
    std::atomic<bool> saw_cancel{false};

private:
    bool started_ = false;
};

TEST(HttpServer, ClientDisconnectIsNoticedWithoutWriting) {
    auto stream = std::make_shared<QuietStream>();
    RunningServer srv({}, [&](HttpServer& s) {
        s.get("/stream", [&](const HttpRequest&, const ClientConnection&) { return HttpResponse::event_stream(stream); });
    });
    const std::string first = [&] {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(srv.port()));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        const std::string req = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
        (void)!write(fd, req.data(), req.size());
        std::string got;
        char buf[512];
        ssize_t n = 0;
        while (got.find("hello") == std::string::npos && (n = read(fd, buf, sizeof(buf))) > 0) {
            got.append(buf, static_cast<std::size_t>(n));
        }
        close(fd);  // the client goes away mid-stream, after the event arrived
        return got;
    }();
    EXPECT_TRUE(first.starts_with("HTTP/1.1 200")) << first;
    for (int i = 0; i < 250 && !stream->saw_cancel; ++i) std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(stream->saw_cancel);
}

TEST(HttpServer, WriteFailureAbortsTheStream) {
    auto stream = std::make_shared<CountingStream>(-1);
    RunningServer srv({}, [&](HttpServer& s) {
        s.get("/stream", [&](const HttpRequest&, const ClientConnection&) { return HttpResponse::event_stream(stream); });
    });
    int events = 0;
    auto c = srv.client();
    c.Get("/stream", [&](const char*, std::size_t) { return ++events < 3; });  // the client stops reading
    for (int i = 0; i < 250 && !stream->aborted; ++i) std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(stream->aborted);
}

TEST(HttpServer, ThreadPoolServesManyConcurrentRequests) {
    constexpr int kClients = 48;
    std::mutex mutex;
    std::condition_variable cv;
    int active = 0;
    int peak = 0;
    HttpServerOptions options;
    options.threads = 64;
    RunningServer srv(options, [&](HttpServer& s) {
        s.get("/wait", [&](const HttpRequest&, const ClientConnection&) {
            std::unique_lock lock(mutex);
            peak = std::max(peak, ++active);
            cv.notify_all();
            // Every request waits until all are inside at once (or gives up after a while).
            cv.wait_for(lock, 10s, [&] { return peak >= kClients; });
            --active;
            return HttpResponse::json(200, {{"peak", peak}});
        });
    });
    std::vector<std::future<int>> results;
    for (int i = 0; i < kClients; ++i) {
        results.push_back(std::async(std::launch::async, [&] {
            auto c = srv.client();
            auto r = c.Get("/wait");
            return r ? r->status : -1;
        }));
    }
    for (auto& f : results) EXPECT_EQ(f.get(), 200);
    EXPECT_EQ(peak, kClients);
}

TEST(HttpServer, ListenBacklogIsRaised) {
    HttpServerOptions options;
    options.listen_backlog = 777;
    RunningServer srv(options, add_basic_routes);
    FILE* ss = popen(("ss -ltnH 'sport = :" + std::to_string(srv.port()) + "' 2>/dev/null").c_str(), "r");
    ASSERT_NE(ss, nullptr);
    char line[512] = {};
    const bool got = fgets(line, sizeof(line), ss) != nullptr;
    pclose(ss);
    if (!got) GTEST_SKIP() << "ss is not available";
    // State Recv-Q Send-Q Local Peer: for a listener, Send-Q is the backlog.
    char state[32];
    unsigned recv_q = 0, send_q = 0;
    ASSERT_EQ(sscanf(line, "%31s %u %u", state, &recv_q, &send_q), 3) << line;
    EXPECT_EQ(send_q, 777u) << line;
}

TEST(HttpServer, SecondServerOnTheSamePortFailsToBind) {
    RunningServer srv({}, add_basic_routes);
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = srv.port();
    HttpServer second(options);
    EXPECT_THROW(second.bind(), std::exception);
}

// A server with one streaming route and a client reading from it, for the shutdown tests.
struct StreamingClientAndServer {
    explicit StreamingClientAndServer(std::shared_ptr<CountingStream> s) : stream(std::move(s)), server(options()) {
        server.get("/stream", [this](const HttpRequest&, const ClientConnection&) {
            return HttpResponse::event_stream(stream);
        });
        server.bind();
        runner = std::thread([this] { server.run(); });
        client = std::thread([this] {
            httplib::Client c("127.0.0.1", server.port());
            c.Get("/stream", [this](const char* data, std::size_t n) {
                std::lock_guard lock(mutex);
                received.append(data, n);
                return true;
            });
        });
        while (text().empty()) std::this_thread::sleep_for(5ms);
    }
    static HttpServerOptions options() {
        HttpServerOptions o;
        o.host = "127.0.0.1";
        o.port = 0;
        o.access_log = false;
        o.keep_alive_timeout_s = 1;
        return o;
    }
    std::string text() {
        std::lock_guard lock(mutex);
        return received;
    }
    void join() {
        client.join();
        runner.join();
    }

    std::shared_ptr<CountingStream> stream;
    HttpServer server;
    std::thread runner;
    std::thread client;
    std::mutex mutex;
    std::string received;
};

TEST(HttpServer, GracefulShutdownFinishesInFlightStreams) {
    StreamingClientAndServer t(std::make_shared<CountingStream>(25));  // about half a second
    t.server.shutdown(10s);
    // No new connections once draining.
    EXPECT_EQ(raw_exchange(t.server.port(), "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n").find("data: 0"),
              std::string::npos);
    t.join();
    EXPECT_NE(t.text().find("data: 24\n\n"), std::string::npos) << t.text();
    EXPECT_FALSE(t.stream->saw_cancel);
}

TEST(HttpServer, ShutdownDeadlineCancelsInFlightStreams) {
    StreamingClientAndServer t(std::make_shared<CountingStream>(-1));  // never ends by itself
    t.server.shutdown(200ms);
    t.join();
    EXPECT_TRUE(t.stream->saw_cancel);
    EXPECT_NE(t.text().find("data: cancelled"), std::string::npos);
    EXPECT_EQ(t.server.in_flight(), 0u);
}

TEST(SignalWatcher, RunsTheCallbackOnSigterm) {
    EXPECT_EXIT(
        {
            SignalWatcher watcher([](int signal) { _exit(signal == SIGTERM ? 0 : 3); });
            kill(getpid(), SIGTERM);
            std::this_thread::sleep_for(5s);
            _exit(1);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace msa::server
