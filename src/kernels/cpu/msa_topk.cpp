#include "kernels/cpu/msa_topk.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace msa::cpu {

void keyed_scores(const float* scores, std::int32_t local, std::uint32_t* keys) {
    float lo = INFINITY, hi = -INFINITY;
    for (std::int32_t b = 0; b < local; ++b) {
        if (std::isnan(scores[b])) continue;
        lo = std::min(lo, scores[b]);
        hi = std::max(hi, scores[b]);
    }
    float scale = 65534.0f / (hi - lo);
    if (!std::isfinite(scale)) scale = 0.0f;  // max == min, or no finite score
    const float bias = std::fma(-lo, scale, 1.5f);
    for (std::int32_t b = 0; b < local; ++b) {
        float v = std::isnan(scores[b]) ? 0.0f : std::fma(scores[b], scale, bias);
        if (!(v >= 0.0f)) v = 0.0f;  // also catches NaN from inf * 0
        v = std::min(v, 65535.0f);
        const std::uint32_t q = std::isnan(scores[b]) ? 0u : static_cast<std::uint32_t>(v);
        keys[b] = (q << 16) | (~static_cast<std::uint32_t>(b) & 0xFFFFu);
    }
}

void select_top_blocks(const float* scores, std::int32_t local, int k, TopkMode mode, std::int32_t* out) {
    MSA_CHECK(k >= 1, "MSA top-k needs k >= 1, got {}", k);
    MSA_CHECK(local < kMaxMsaBlocks, "MSA top-k supports at most {} blocks per row, got {}", kMaxMsaBlocks, local + 1);
    if (local < 0) {
        std::fill_n(out, k, -1);
        return;
    }
    if (local + 1 <= k) {
        for (int s = 0; s < k; ++s) out[s] = s <= local ? s : -1;
        return;
    }
    const int keep = k - 1;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(local));
    for (std::int32_t b = 0; b < local; ++b) ids[static_cast<std::size_t>(b)] = b;
    if (mode == TopkMode::keyed) {
        std::vector<std::uint32_t> keys(static_cast<std::size_t>(local));
        keyed_scores(scores, local, keys.data());
        std::nth_element(ids.begin(), ids.begin() + keep, ids.end(),
                         [&](std::int32_t a, std::int32_t b) { return keys[a] > keys[b]; });
    } else {
        auto better = [&](std::int32_t a, std::int32_t b) {
            const float sa = scores[a], sb = scores[b];
            const bool na = std::isnan(sa), nb = std::isnan(sb);
            if (na != nb) return nb;  // a non-NaN score beats NaN
            if (!na && sa != sb) return sa > sb;
            return a < b;
        };
        std::nth_element(ids.begin(), ids.begin() + keep, ids.end(), better);
    }
    std::sort(ids.begin(), ids.begin() + keep);
    for (int s = 0; s < keep; ++s) out[s] = ids[static_cast<std::size_t>(s)];
    out[keep] = local;
}

}  // namespace msa::cpu
