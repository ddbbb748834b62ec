// Errors of the Jinja engine. Everything the engine throws is an msa::Error; TemplateError adds the position in
// the template source (filled in by the parser or by the innermost expression or statement that failed).
#pragma once

#include "core/error.h"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace msa::jinja {

class TemplateError : public Error {
public:
    TemplateError(std::string message, int line, int column, bool raised_by_template = false)
        : Error(message), message_(std::move(message)), line_(line), column_(column),
          raised_by_template_(raised_by_template) {}

    // The message without position.
    const std::string& message() const { return message_; }
    int line() const { return line_; }      // 1-based; 0 when unknown
    int column() const { return column_; }  // 1-based; 0 when unknown
    // True for raise_exception() called by the template itself (the message is the template author's).
    bool raised_by_template() const { return raised_by_template_; }

private:
    std::string message_;
    int line_;
    int column_;
    bool raised_by_template_;
};

// Throws an msa::Error (a Python exception in jinja2) with a fmt-formatted message; the evaluator attaches the
// position of the failing node.
template <typename... Args>
[[noreturn]] void raise(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace msa::jinja
