#include "core/log.h"

#include "core/error.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace msa {

LogLevel parse_log_level(std::string_view name) {
    if (name == "trace") return LogLevel::trace;
    if (name == "debug") return LogLevel::debug;
    if (name == "info") return LogLevel::info;
    if (name == "warn" || name == "warning") return LogLevel::warn;
    if (name == "error") return LogLevel::error;
    if (name == "off") return LogLevel::off;
    fail("unknown log level '{}' (expected trace, debug, info, warn, error or off)", name);
}

void set_log_level(LogLevel level) {
    static const bool installed = [] {
        auto logger = spdlog::stderr_color_mt("msa");
        logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
        spdlog::set_default_logger(logger);
        return true;
    }();
    (void)installed;
    spdlog::level::level_enum lv = spdlog::level::info;
    switch (level) {
        case LogLevel::trace: lv = spdlog::level::trace; break;
        case LogLevel::debug: lv = spdlog::level::debug; break;
        case LogLevel::info: lv = spdlog::level::info; break;
        case LogLevel::warn: lv = spdlog::level::warn; break;
        case LogLevel::error: lv = spdlog::level::err; break;
        case LogLevel::off: lv = spdlog::level::off; break;
    }
    spdlog::set_level(lv);
}

}  // namespace msa
