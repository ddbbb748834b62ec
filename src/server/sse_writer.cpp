#include "server/sse_writer.h"

namespace msa::server {

std::string sse_data(std::string_view payload) {
    std::string out;
    out.reserve(payload.size() + 8);
    std::size_t start = 0;
    while (true) {
        const auto nl = payload.find('\n', start);
        out += "data: ";
        out.append(payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
        out += '\n';
        if (nl == std::string_view::npos) break;
        start = nl + 1;
    }
    out += '\n';
    return out;
}

std::string json_dump(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool SseWriter::raw(std::string_view bytes) {
    if (!ok_ || done_) return false;
    if (!write_(bytes)) {
        ok_ = false;
        return false;
    }
    bytes_ += bytes.size();
    return true;
}

bool SseWriter::error(const ApiError& error) {
    if (done_) return false;
    event(error.to_json());
    return done();
}

bool SseWriter::done() {
    if (done_) return false;
    const bool written = raw(kSseDone);
    done_ = true;
    return written;
}

}  // namespace msa::server
