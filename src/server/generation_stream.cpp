#include "server/generation_stream.h"

namespace msa::server {

GenerationStream::GenerationStream(std::shared_ptr<GenerationSession> session, std::chrono::milliseconds ping_interval,
                                   std::chrono::milliseconds poll_interval)
    : session_(std::move(session)),
      ping_interval_(ping_interval),
      poll_interval_(poll_interval),
      last_write_(std::chrono::steady_clock::now()) {}

bool GenerationStream::next(const std::function<bool(std::string_view)>& write, const ClientConnection& connection) {
    if (done_) return false;
    std::size_t written_before = 0;
    SseWriter out([&](std::string_view bytes) {
        written_before += bytes.size();
        return write(bytes);
    });
    if (connection.cancelled()) {
        session_->cancel_all();
        session_->record("abort");
        done_ = true;
        // Shutting down past the deadline: tell a client that is still there why its stream ends.
        if (!connection.closed()) out.error(service_unavailable("The server is shutting down."));
        return false;
    }
    auto events = session_->wait(poll_interval_);
    const auto now = std::chrono::steady_clock::now();
    if (!events.empty()) on_events(events, out);
    if (session_->all_finished()) {
        const std::string reason = on_complete(out);
        out.done();
        session_->record(reason);
        done_ = true;
        return false;
    }
    if (written_before > 0) {
        last_write_ = now;
    } else if (now - last_write_ >= ping_interval_) {
        out.ping();
        last_write_ = now;
    }
    if (!out.ok()) {
        // The client is gone (a write failed): stop generating now.
        session_->cancel_all();
        session_->record("abort");
        done_ = true;
        return false;
    }
    return true;
}

void GenerationStream::on_abort() {
    session_->cancel_all();
    session_->record("abort");
}

}  // namespace msa::server
