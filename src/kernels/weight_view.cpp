#include "kernels/weight_view.h"

namespace msa {

std::string_view linear_format_name(LinearFormat format) {
    switch (format) {
        case LinearFormat::f32: return "F32";
        case LinearFormat::f16: return "F16";
        case LinearFormat::bf16: return "BF16";
        case LinearFormat::mxfp8: return "MXFP8";
        case LinearFormat::nvfp4: return "NVFP4";
    }
    return "?";
}

std::size_t WeightView::bytes() const {
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    switch (format) {
        case LinearFormat::f32: return n * 4;
        case LinearFormat::f16:
        case LinearFormat::bf16: return n * 2;
        case LinearFormat::mxfp8: return n + n / 32;
        case LinearFormat::nvfp4: return n / 2 + n / 16;
    }
    return 0;
}

}  // namespace msa
