// Logging: a thin layer over spdlog so that the library can be silenced or redirected in one place.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace msa {

enum class LogLevel { trace, debug, info, warn, error, off };

// Parses "trace|debug|info|warn|error|off"; throws msa::Error on anything else.
LogLevel parse_log_level(std::string_view name);
// Sets the level of the process-wide logger (stderr). Default: info.
void set_log_level(LogLevel level);

}  // namespace msa

#define MSA_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define MSA_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define MSA_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define MSA_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define MSA_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
