#include "kernels/random_weights.h"

#include "formats/mxfp8.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/linear.h"

#include <cstring>

namespace msa::bench {

OwnedLinear random_linear(LinearFormat f, std::int64_t rows, std::int64_t cols, std::mt19937& rng,
                          const OwnedLinear* copy_of) {
    OwnedLinear w;
    if (copy_of != nullptr) {
        w.data = copy_of->data;
        w.scales = copy_of->scales;
    } else {
        const auto n = static_cast<std::size_t>(rows * cols);
        std::vector<float> x(n);
        std::normal_distribution<float> dist(0.0f, 0.02f);
        for (auto& v : x) v = dist(rng);
        if (f == LinearFormat::bf16) {
            w.data.resize(2 * n);
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint16_t b = float_to_bf16(x[i]);
                std::memcpy(w.data.data() + 2 * i, &b, 2);
            }
        } else if (f == LinearFormat::mxfp8) {
            w.data.resize(n);
            w.scales.resize(n / 32);
            mxfp8_quantize(x.data(), n, w.data.data(), w.scales.data());
        } else {
            w.data.resize(n / 2);
            w.scales.resize(n / 16);
            w.global = nvfp4_quantize_weight(x.data(), n, w.data.data(), w.scales.data());
        }
    }
    if (copy_of != nullptr) w.global = copy_of->global;
    w.view = {f, rows, cols, w.data.data(), w.scales.empty() ? nullptr : w.scales.data(), w.global};
    if (f == LinearFormat::mxfp8) {
        w.flags = copy_of != nullptr ? copy_of->flags : cpu::mxfp8_exponent_zero_blocks(w.view);
        w.view.mxfp8_exponent_zero_blocks = w.flags.data();
    }
    return w;
}

}  // namespace msa::bench
