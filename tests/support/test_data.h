// Small helpers shared by the kernel, KV and model tests: seeded random data and weights in every format.
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>
#include <random>
#include <vector>

namespace msa::test {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// A weight [rows][cols] quantised from random floats into `format`, owning its bytes. `view()` describes it;
// `dense` holds the exact dequantised values (what every exact kernel must use).
struct OwnedWeight {
    LinearFormat format = LinearFormat::f32;
    std::int64_t rows = 0, cols = 0;
    std::vector<std::uint8_t> data;
    std::vector<std::uint8_t> scales;
    float global_scale = 1.0f;
    std::vector<float> dense;  // [rows][cols]

    WeightView view() const;
};

OwnedWeight make_weight(LinearFormat format, std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                        float amplitude = 1.0f);

}  // namespace msa::test
