// Server-Sent Events framing for OpenAI streams (api.md section 3): every event is `data: <json>\n\n`, the stream
// ends with `data: [DONE]\n\n` (also after an error, which goes out as a data frame holding the error envelope),
// and SSE comment lines `: ping` keep proxies from timing out during long prefills.
#pragma once

#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace msa::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSsePing = ": ping\n\n";

// `data: <payload>\n\n`; a payload with newlines becomes several data lines (the SSE rule), which compact JSON
// never needs.
std::string sse_data(std::string_view payload);
// Compact JSON; invalid UTF-8 inside strings is replaced by U+FFFD instead of throwing.
std::string json_dump(const nlohmann::json& value);

class SseWriter {
public:
    // Writes raw bytes to the connection; returns false once the client is gone.
    using WriteFn = std::function<bool(std::string_view)>;
    explicit SseWriter(WriteFn write) : write_(std::move(write)) {}

    bool event(const nlohmann::json& payload) { return raw(sse_data(json_dump(payload))); }
    bool ping() { return raw(kSsePing); }
    // The error envelope as a data frame, then [DONE].
    bool error(const ApiError& error);
    // `data: [DONE]`; later calls write nothing.
    bool done();

    // False after any write failed: the client went away and nothing more will reach it.
    bool ok() const { return ok_; }
    bool finished() const { return done_; }
    std::size_t bytes_written() const { return bytes_; }

private:
    bool raw(std::string_view bytes);

    WriteFn write_;
    bool ok_ = true;
    bool done_ = false;
    std::size_t bytes_ = 0;
};

}  // namespace msa::server
