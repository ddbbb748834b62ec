#include "kernels/cpu/weight_dequant.h"

#include "formats/scalar_formats.h"
#include "kernels/cpu/fp_tables.h"

#include <cmath>

namespace msa::cpu {

float dequantize_weight_row(const WeightView& w, std::int64_t n, float* out) {
    const std::int64_t K = w.cols;
    switch (w.format) {
        case LinearFormat::f32: {
            const float* src = static_cast<const float*>(w.data) + n * K;
            for (std::int64_t k = 0; k < K; ++k) out[k] = src[k];
            return 1.0f;
        }
        case LinearFormat::f16: {
            const auto* src = static_cast<const std::uint16_t*>(w.data) + n * K;
            for (std::int64_t k = 0; k < K; ++k) out[k] = fp16_to_float(src[k]);
            return 1.0f;
        }
        case LinearFormat::bf16: {
            const auto* src = static_cast<const std::uint16_t*>(w.data) + n * K;
            for (std::int64_t k = 0; k < K; ++k) out[k] = bf16_to_float(src[k]);
            return 1.0f;
        }
        case LinearFormat::mxfp8: {
            const auto* src = static_cast<const std::uint8_t*>(w.data) + n * K;
            const std::uint8_t* sc = w.scales + n * (K / 32);
            for (std::int64_t k = 0; k < K; ++k) {
                out[k] = std::ldexp(e4m3_value(src[k]), static_cast<int>(sc[k / 32]) - 127);
            }
            return 1.0f;
        }
        case LinearFormat::nvfp4: {
            const auto* src = static_cast<const std::uint8_t*>(w.data) + n * (K / 2);
            const std::uint8_t* sc = w.scales + n * (K / 16);
            for (std::int64_t k = 0; k < K; ++k) {
                const std::uint8_t byte = src[k / 2];
                const std::uint8_t code = (k & 1) ? (byte >> 4) : (byte & 0x0F);
                out[k] = kE2m1Values[code] * e4m3_value(sc[k / 16]);
            }
            return w.global_scale;
        }
    }
    return 1.0f;
}

void weight_row(const WeightView& w, std::int64_t n, float* out) {
    const float post = dequantize_weight_row(w, n, out);
    if (post != 1.0f) {
        for (std::int64_t k = 0; k < w.cols; ++k) out[k] *= post;
    }
}

}  // namespace msa::cpu
