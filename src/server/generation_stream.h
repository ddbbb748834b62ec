// The SSE side of a generating request, shared by chat completions and completions: runs on the connection's
// thread, waits for backend events, lets the endpoint turn them into chunks, sends `: ping` comments when
// nothing else went out for a while, and stops the sequences as soon as the client is gone or the server is
// shutting down (then the stream ends with an error frame and [DONE]).
#pragma once

#include "server/generation_session.h"
#include "server/http_server.h"
#include "server/sse_writer.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace msa::server {

class GenerationStream : public StreamBody {
public:
    GenerationStream(std::shared_ptr<GenerationSession> session, std::chrono::milliseconds ping_interval,
                     std::chrono::milliseconds poll_interval);

    bool next(const std::function<bool(std::string_view)>& write, const ClientConnection& connection) final;
    void on_abort() final;

protected:
    // Turns events into chunks (through `out`). Called with every batch of events, in order.
    virtual void on_events(std::vector<ChoiceEvent>& events, SseWriter& out) = 0;
    // All sequences finished: write the closing chunks (usage, or an error) before [DONE]; return the finish
    // reason recorded in the metrics.
    virtual std::string on_complete(SseWriter& out) = 0;

    GenerationSession& session() { return *session_; }

private:
    std::shared_ptr<GenerationSession> session_;
    std::chrono::milliseconds ping_interval_;
    std::chrono::milliseconds poll_interval_;
    std::chrono::steady_clock::time_point last_write_;
    bool done_ = false;
};

}  // namespace msa::server
