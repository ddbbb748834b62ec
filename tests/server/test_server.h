// Test helpers: an HttpServer on a free loopback port, running on its own thread.
#pragma once

#include "server/http_server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <thread>

namespace msa::server::testing {

// A server on a free loopback port, running on its own thread for the test's lifetime.
class RunningServer {
public:
    explicit RunningServer(HttpServerOptions options, const std::function<void(HttpServer&)>& setup) {
        options.host = "127.0.0.1";
        options.port = 0;
        options.access_log = false;
        server_ = std::make_unique<HttpServer>(options);
        setup(*server_);
        server_->bind();
        thread_ = std::thread([this] { server_->run(); });
    }
    ~RunningServer() {
        server_->stop();
        thread_.join();
    }
    int port() const { return server_->port(); }
    HttpServer& server() { return *server_; }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port());
        c.set_read_timeout(10, 0);
        return c;
    }
    void join() { thread_.join(); thread_ = std::thread([] {}); }

private:
    std::unique_ptr<HttpServer> server_;
    std::thread thread_;
};

// Posts `body` to `path` over a raw socket, reads the response until `until` appears in it (or the server closes),
// then closes the connection: a client that goes away mid-stream. Returns what was read.
inline std::string post_then_disconnect(int port, const std::string& path, const std::string& body,
                                        const std::string& until) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string got;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        const std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
            char buf[1024];
            ssize_t n;
            while (got.find(until) == std::string::npos && (n = read(fd, buf, sizeof(buf))) > 0) got.append(buf, n);
        }
    }
    close(fd);
    return got;
}

}  // namespace msa::server::testing
