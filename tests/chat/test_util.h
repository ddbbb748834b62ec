// Shared helpers of the chat tests: paths of the test data, JSON loading, and a fixed time zone so that
// strftime_now() renders the same text everywhere.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

namespace msa::test {

inline std::filesystem::path source_dir() {
    return std::filesystem::path(MSA_SOURCE_DIR);
}

inline std::filesystem::path chat_data_dir() {
    return source_dir() / "tests" / "chat" / "data";
}

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline nlohmann::ordered_json read_json(const std::filesystem::path& path) {
    return nlohmann::ordered_json::parse(read_text(path));
}

// The unix time the goldens and cases use for strftime_now() (2025-03-14 15:09:26 UTC).
constexpr std::int64_t kNowUnix = 1741964966;

inline void use_utc() {
    setenv("TZ", "UTC", 1);
    tzset();
}

}  // namespace msa::test
