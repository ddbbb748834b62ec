// Error handling shared by every module: one exception type whose message is a complete, user-facing sentence
// (what failed and where: file, tensor, field, request parameter). Callers at the edge (CLI, server) print the
// message on one line and exit or answer with an error; nothing below them prints.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace msa {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws msa::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace msa

// MSA_CHECK(cond, "fmt {}", args...): throws msa::Error with the message when cond is false.
#define MSA_CHECK(cond, ...)        \
    do {                            \
        if (!(cond)) {              \
            ::msa::fail(__VA_ARGS__); \
        }                           \
    } while (0)
