#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {

RopeTables rope_tables(const std::int32_t* positions, std::int64_t count, int rotary_dim, double theta) {
    RopeTables t;
    t.half = rotary_dim / 2;
    t.cos.resize(static_cast<std::size_t>(count * t.half));
    t.sin.resize(static_cast<std::size_t>(count * t.half));
    std::vector<double> inv_freq(static_cast<std::size_t>(t.half));
    for (int i = 0; i < t.half; ++i) inv_freq[i] = std::pow(theta, -2.0 * i / rotary_dim);
    for (std::int64_t p = 0; p < count; ++p) {
        for (int i = 0; i < t.half; ++i) {
            const double angle = static_cast<double>(positions[p]) * inv_freq[static_cast<std::size_t>(i)];
            t.cos[static_cast<std::size_t>(p * t.half + i)] = static_cast<float>(std::cos(angle));
            t.sin[static_cast<std::size_t>(p * t.half + i)] = static_cast<float>(std::sin(angle));
        }
    }
    return t;
}

const RopeTables& rope_tables_reused(const std::int32_t* positions, std::int64_t count, int rotary_dim, double theta) {
    struct Kept {
        bool valid = false;
        std::vector<std::int32_t> positions;
        int rotary_dim = 0;
        double theta = 0.0;
        RopeTables tables;
    };
    thread_local Kept kept;
    const bool same = kept.valid && kept.rotary_dim == rotary_dim && kept.theta == theta &&
                      kept.positions.size() == static_cast<std::size_t>(count) &&
                      std::equal(kept.positions.begin(), kept.positions.end(), positions);
    if (!same) {
        kept.valid = false;  // stays invalid if rope_tables() throws
        kept.tables = rope_tables(positions, count, rotary_dim, theta);
        kept.positions.assign(positions, positions + count);
        kept.rotary_dim = rotary_dim;
        kept.theta = theta;
        kept.valid = true;
    }
    return kept.tables;
}

void apply_rope(float* x, std::int64_t count, int heads, int head_dim, const RopeTables& tables) {
    const int half = tables.half;
    for (std::int64_t p = 0; p < count; ++p) {
        const float* c = tables.cos.data() + p * half;
        const float* s = tables.sin.data() + p * half;
        for (int h = 0; h < heads; ++h) {
            float* v = x + (p * heads + h) * head_dim;
            for (int i = 0; i < half; ++i) {
                const float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

}  // namespace msa::cpu
