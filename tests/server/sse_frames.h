// Test helper: splits a Server-Sent Events body into its frames (JSON data frames, `: ping` comments, [DONE]).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace msa::server::testing {

struct Sse {
    std::vector<nlohmann::json> events;
    int pings = 0;
    bool done_last = false;  // [DONE] was the last frame
    std::string raw;
};

inline Sse parse_sse(const std::string& body) {
    Sse out;
    out.raw = body;
    std::size_t start = 0;
    while (start < body.size()) {
        const auto end = body.find("\n\n", start);
        const std::string frame = body.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? body.size() : end + 2;
        out.done_last = false;
        if (frame.starts_with(":")) {
            ++out.pings;
        } else if (frame == "data: [DONE]") {
            out.done_last = true;
        } else {
            EXPECT_TRUE(frame.starts_with("data: ")) << frame;
            out.events.push_back(nlohmann::json::parse(frame.substr(6), nullptr, false));
            EXPECT_FALSE(out.events.back().is_discarded()) << frame;
        }
    }
    return out;
}

}  // namespace msa::server::testing
