// Helpers for stream tests: feed the same text to an incremental parser in different chunkings.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server::testing {

// The text cut at the given positions (sorted, within the text).
inline std::vector<std::string> cut_at(std::string_view text, std::vector<std::size_t> cuts) {
    std::vector<std::string> pieces;
    std::size_t start = 0;
    for (const auto c : cuts) {
        pieces.emplace_back(text.substr(start, c - start));
        start = c;
    }
    pieces.emplace_back(text.substr(start));
    return pieces;
}

// Random cuts (each byte boundary cut with probability p), from a seed.
inline std::vector<std::string> random_chunks(std::string_view text, std::uint64_t seed, double p = 0.3) {
    std::mt19937_64 rng(seed);
    std::bernoulli_distribution cut(p);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < text.size(); ++i) {
        if (cut(rng)) cuts.push_back(i);
    }
    return cut_at(text, cuts);
}

// One byte per chunk.
inline std::vector<std::string> byte_chunks(std::string_view text) {
    std::vector<std::string> pieces;
    for (const char c : text) pieces.emplace_back(1, c);
    return pieces;
}

}  // namespace msa::server::testing
