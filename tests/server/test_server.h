// Test helpers: an HttpServer on a free loopback port, running on its own thread.
#pragma once

#include "server/http_server.h"

#include <httplib.h>

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

}  // namespace msa::server::testing
