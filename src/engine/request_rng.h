// Per-request random numbers that depend only on (seed, stream, position, draw): a counter-based generator, so
// that a request's samples do not depend on batch composition, step boundaries, chunked prefill or preemption
// (a recomputed sequence draws the same numbers again). The stream separates the n samples of one request.
#pragma once

#include <cstdint>

namespace msa {

class RequestRng {
public:
    RequestRng() = default;
    RequestRng(std::uint64_t seed, std::uint64_t stream) : key_(mix(mix(seed) ^ (stream * 0xD1B54A32D192ED03ull))) {}

    // A uniform double in [0, 1) for output position `position` (0 = first generated token) and the draw-th use at
    // that position (sampling uses draw 0; speculative verification uses further draws).
    double uniform(std::uint64_t position, std::uint32_t draw = 0) const {
        // SplitMix64 output at counter (position, draw) of a stream starting at key_.
        const std::uint64_t counter = (position << 6) + draw;
        return static_cast<double>(mix(key_ + (counter + 1) * 0x9E3779B97F4A7C15ull) >> 11) * 0x1.0p-53;
    }

    // The SplitMix64 finaliser: a bijection on 64-bit words with full avalanche.
    static std::uint64_t mix(std::uint64_t z) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

private:
    std::uint64_t key_ = 0;
};

}  // namespace msa
