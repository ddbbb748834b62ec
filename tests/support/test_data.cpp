#include "support/test_data.h"

#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"

#include <cmath>
#include <cstring>

namespace msa::test {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

WeightView OwnedWeight::view() const {
    WeightView v;
    v.format = format;
    v.rows = rows;
    v.cols = cols;
    v.data = data.data();
    v.scales = scales.empty() ? nullptr : scales.data();
    v.global_scale = global_scale;
    return v;
}

OwnedWeight make_weight(LinearFormat format, std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                        float amplitude) {
    OwnedWeight w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    const auto n = static_cast<std::size_t>(rows * cols);
    auto src = random_floats(n, seed, -amplitude, amplitude);
    w.dense.resize(n);
    switch (format) {
        case LinearFormat::f32:
            w.data.resize(n * 4);
            std::memcpy(w.data.data(), src.data(), n * 4);
            w.dense = src;
            break;
        case LinearFormat::f16:
        case LinearFormat::bf16: {
            w.data.resize(n * 2);
            auto* d = reinterpret_cast<std::uint16_t*>(w.data.data());
            for (std::size_t i = 0; i < n; ++i) {
                if (format == LinearFormat::bf16) {
                    d[i] = float_to_bf16(src[i]);
                    w.dense[i] = bf16_to_float(d[i]);
                } else {
                    // Round through bf16 first: every bf16 value in this range is exact in fp16.
                    const float f = bf16_to_float(float_to_bf16(src[i]));
                    std::uint32_t b;
                    std::memcpy(&b, &f, 4);
                    const int e = static_cast<int>((b >> 23) & 0xFF) - 127;
                    std::uint16_t h = 0;
                    if (f != 0.0f && e >= -14) {
                        h = static_cast<std::uint16_t>(((b >> 16) & 0x8000) | ((e + 15) << 10) | ((b >> 13) & 0x3FF));
                    }
                    d[i] = h;
                    w.dense[i] = fp16_to_float(h);
                }
            }
            break;
        }
        case LinearFormat::mxfp8:
            w.data.resize(n);
            w.scales.resize(n / 32);
            for (std::int64_t r = 0; r < rows; ++r) {
                mxfp8_quantize(src.data() + r * cols, static_cast<std::size_t>(cols), w.data.data() + r * cols,
                               w.scales.data() + r * (cols / 32));
            }
            mxfp8_dequantize(w.data.data(), w.scales.data(), n, w.dense.data());
            break;
        case LinearFormat::nvfp4:
            w.data.resize(n / 2);
            w.scales.resize(n / 16);
            w.global_scale = nvfp4_quantize_weight(src.data(), n, w.data.data(), w.scales.data());
            nvfp4_dequantize(w.data.data(), w.scales.data(), n, w.global_scale, w.dense.data());
            break;
    }
    return w;
}

}  // namespace msa::test
