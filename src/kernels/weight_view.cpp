#include "kernels/weight_view.h"

namespace msa {

std::string_view weight_format_name(WeightFormat format) {
    switch (format) {
        case WeightFormat::f32: return "F32";
        case WeightFormat::f16: return "F16";
        case WeightFormat::bf16: return "BF16";
        case WeightFormat::mxfp8: return "MXFP8";
        case WeightFormat::nvfp4: return "NVFP4";
    }
    return "?";
}

std::size_t WeightView::bytes() const {
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    switch (format) {
        case WeightFormat::f32: return n * 4;
        case WeightFormat::f16:
        case WeightFormat::bf16: return n * 2;
        case WeightFormat::mxfp8: return n + n / 32;
        case WeightFormat::nvfp4: return n / 2 + n / 16;
    }
    return 0;
}

}  // namespace msa
