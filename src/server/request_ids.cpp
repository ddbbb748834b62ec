#include "server/request_ids.h"

#include <random>

namespace msa::server {

std::string random_hex(std::size_t n) {
    thread_local std::mt19937_64 rng = [] {
        std::random_device device;
        std::seed_seq seq{device(), device(), device(), device()};
        return std::mt19937_64(seq);
    }();
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(n, '0');
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (i % 16 == 0) bits = rng();
        out[i] = kDigits[bits & 0xF];
        bits >>= 4;
    }
    return out;
}

std::string chat_completion_id() { return "chatcmpl-" + random_hex(32); }
std::string completion_id() { return "cmpl-" + random_hex(32); }
std::string tool_call_id() { return "call_" + random_hex(24); }

}  // namespace msa::server
