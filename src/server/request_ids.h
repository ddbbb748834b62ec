// Identifiers the OpenAI API hands out: "chatcmpl-<32 hex>", "cmpl-<32 hex>" and tool-call ids "call_<24 hex>".
// Random (per-thread generator seeded from std::random_device), so ids from different requests never collide in
// practice and do not reveal request counts.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace msa::server {

// n lowercase hex digits.
std::string random_hex(std::size_t n);

std::string chat_completion_id();
std::string completion_id();
std::string tool_call_id();

// Something that makes ids; the parsers take one so that tests can make them deterministic.
using IdGenerator = std::function<std::string()>;

}  // namespace msa::server
