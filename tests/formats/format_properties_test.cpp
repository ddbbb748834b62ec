// RapidCheck properties of the formats: round trip, monotonicity, saturation and sign symmetry of every encoder;
// the NVFP4 and MXFP8 quantisers' error bounds and scale rules; bulk paths equal to the scalar functions.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "formats/convert.h"
#include "formats/cpu_paths.h"
#include "formats/library_formats.h"
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"

namespace msa::test {
namespace {

// Floats of every kind: any bit pattern, or sign * 2^e * (1 + m) with e spread over [-40, 40] (where the formats
// live, including their subnormals and overflow), or special values.
rc::Gen<float> any_float() {
    const auto specials =
        rc::gen::element(0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                         std::numeric_limits<float>::denorm_min(), 448.0f, 464.0f, 57344.0f, 6.0f);
    const auto scaled = rc::gen::map(
        rc::gen::tuple(rc::gen::arbitrary<bool>(), rc::gen::inRange(-40, 41), rc::gen::inRange(0, 1 << 23)),
        [](const std::tuple<bool, int, int>& t) {
            const float magnitude =
                std::ldexp(1.0f + std::ldexp(static_cast<float>(std::get<2>(t)), -23), std::get<1>(t));
            return std::get<0>(t) ? -magnitude : magnitude;
        });
    const auto bits = rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t b) { return float_of(b); });
    return rc::gen::weightedOneOf<float>({{6, scaled}, {3, bits}, {1, specials}});
}

rc::Gen<float> finite_float() {
    return rc::gen::suchThat(any_float(), [](float x) { return std::isfinite(x); });
}

rc::Gen<const LibraryFormat*> any_format() {
    std::vector<const LibraryFormat*> formats;
    for (const LibraryFormat& f : library_formats()) formats.push_back(&f);
    return rc::gen::elementOf(formats);
}

rc::Gen<Overflow> mode_of(const LibraryFormat& f) {
    return rc::gen::elementOf(f.modes);
}

double max_finite(const LibraryFormat& f) {
    return ref_ladder(*f.spec).values.back();
}

RC_GTEST_PROP(FormatProperties, EncodingIsIdempotent, ()) {
    const LibraryFormat& f = *(*any_format());
    const Overflow mode = *mode_of(f);
    const float x = *any_float();
    const std::uint32_t code = f.encode(x, mode);
    const float decoded = f.decode(code);
    RC_PRE(!std::isnan(decoded));
    RC_ASSERT(f.encode(decoded, mode) == code);
}

RC_GTEST_PROP(FormatProperties, EncodingIsMonotonic, ()) {
    const LibraryFormat& f = *(*any_format());
    const Overflow mode = *mode_of(f);
    float a = *any_float();
    float b = *any_float();
    RC_PRE(!std::isnan(a) && !std::isnan(b));
    if (b < a) std::swap(a, b);
    const float qa = f.decode(f.encode(a, mode));
    const float qb = f.decode(f.encode(b, mode));
    RC_PRE(!std::isnan(qa) && !std::isnan(qb));  // E4M3's ieee overflow is NaN
    RC_ASSERT(qa <= qb);
}

RC_GTEST_PROP(FormatProperties, SaturationClampsToTheLargestFiniteValue, ()) {
    const LibraryFormat& f = *(*any_format());
    RC_PRE(f.modes.front() == Overflow::saturate);
    const float x = *any_float();
    RC_PRE(!std::isnan(x));
    const double q = f.decode(f.encode(x, Overflow::saturate));
    const double max = max_finite(f);
    RC_ASSERT(std::isfinite(q));
    RC_ASSERT(std::fabs(q) <= max);
    if (std::fabs(double{x}) >= max) RC_ASSERT(std::fabs(q) == max);
}

RC_GTEST_PROP(FormatProperties, EncodingIsSignSymmetric, ()) {
    const LibraryFormat& f = *(*any_format());
    const Overflow mode = *mode_of(f);
    const float x = *any_float();
    const std::uint32_t positive = f.encode(std::fabs(x), mode);
    const std::uint32_t negative = f.encode(-std::fabs(x), mode);
    const bool e2m1_zero = f.spec == &kRefE2M1 && positive == 0;
    RC_ASSERT(negative == (e2m1_zero ? 0u : positive | f.spec->sign_bit()));
}

RC_GTEST_PROP(FormatProperties, DecodedValueIsTheNearest, ()) {
    // No representable value is strictly closer to x than the decoded code (checked against the whole ladder).
    const LibraryFormat& f = *(*any_format());
    const float x = *finite_float();
    const double max = max_finite(f);
    RC_PRE(std::fabs(double{x}) <= max);
    const double q = f.decode(f.encode(x, f.modes.front()));
    const double error = std::fabs(q - x);
    const Ladder ladder = ref_ladder(*f.spec);
    const auto it = std::lower_bound(ladder.values.begin(), ladder.values.end(), std::fabs(double{x}));
    for (auto candidate = it == ladder.values.begin() ? it : it - 1;
         candidate != ladder.values.end() && candidate <= it; ++candidate) {
        RC_ASSERT(error <= std::fabs(*candidate - std::fabs(double{x})));
    }
}

// ---- Block formats -------------------------------------------------------------------------------------------------

rc::Gen<std::vector<float>> finite_blocks(std::size_t block_size) {
    return rc::gen::mapcat(rc::gen::inRange<std::size_t>(1, 5), [block_size](std::size_t blocks) {
        return rc::gen::container<std::vector<float>>(blocks * block_size, finite_float());
    });
}

RC_GTEST_PROP(Nvfp4Properties, DequantisedWithinOneStepOrSaturatedAndSignKept, ()) {
    const std::vector<float> x = *finite_blocks(kNvfp4BlockSize);
    std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / kNvfp4BlockSize);
    std::vector<float> y(x.size());
    nvfp4_quantize(x.data(), x.size(), packed.data(), scales.data());
    nvfp4_dequantize(packed.data(), scales.data(), x.size(), 1.0f, y.data());
    for (std::size_t b = 0; b < scales.size(); ++b) {
        double amax = 0;
        for (std::size_t i = 0; i < kNvfp4BlockSize; ++i) amax = std::max(amax, std::fabs(double{x[b * 16 + i]}));
        RC_ASSERT(scales[b] == nvfp4_scale_code(static_cast<float>(amax)));
        const double scale = ref_decode(kRefE4M3, scales[b]);
        RC_ASSERT(scale >= 0x1p-9);
        RC_ASSERT(scale <= 448.0);
        for (std::size_t i = b * kNvfp4BlockSize; i < (b + 1) * kNvfp4BlockSize; ++i) {
            // One scale step within the ladder; past 6 * scale (a saturated or subnormal scale) the code is 6.
            const double error = std::fabs(double{x[i]} - y[i]);
            RC_ASSERT(error <= std::max(scale, std::fabs(double{x[i]}) - 6 * scale) * (1 + 1e-6));
            RC_ASSERT(y[i] == 0.0f || std::signbit(y[i]) == std::signbit(x[i]));
            RC_ASSERT(!std::signbit(y[i]) || y[i] != 0.0f);  // never -0
        }
    }
}

RC_GTEST_PROP(Mxfp8Properties, ScaleBracketsTheLargestElementAndErrorIsBounded, ()) {
    const std::vector<float> x = *finite_blocks(kMxfp8BlockSize);
    std::vector<std::uint8_t> values(x.size()), scales(x.size() / kMxfp8BlockSize);
    std::vector<float> y(x.size());
    mxfp8_quantize(x.data(), x.size(), values.data(), scales.data());
    mxfp8_dequantize(values.data(), scales.data(), x.size(), y.data());
    for (std::size_t b = 0; b < scales.size(); ++b) {
        double amax = 0;
        for (std::size_t i = 0; i < kMxfp8BlockSize; ++i) amax = std::max(amax, std::fabs(double{x[b * 32 + i]}));
        const int exponent = scales[b] - 127;
        if (exponent > -127 && exponent < 127) {  // not clamped: 2^e * 256 <= amax < 2^e * 512
            RC_ASSERT(std::ldexp(256.0, exponent) <= amax);
            RC_ASSERT(amax < std::ldexp(512.0, exponent));
        }
        for (std::size_t i = b * kMxfp8BlockSize; i < (b + 1) * kMxfp8BlockSize; ++i) {
            const double scaled = std::fabs(double{x[i]}) / std::ldexp(1.0, exponent);
            // E4M3 keeps 3 mantissa bits: relative error 2^-4, absolute 2^-10 in the subnormal range; above 448 it
            // saturates.
            const double bound = std::max(std::fabs(double{x[i]}) / 16, std::ldexp(0x1p-10, exponent));
            if (scaled <= 448.0)
                RC_ASSERT(std::fabs(double{y[i]} - x[i]) <= bound * (1 + 1e-9));
            else
                RC_ASSERT(std::fabs(double{y[i]}) == std::ldexp(448.0, exponent));
        }
    }
}

// ---- Bulk paths ----------------------------------------------------------------------------------------------------

RC_GTEST_PROP(BulkProperties, EveryPathEqualsTheScalarFunctions, ()) {
    const auto x = *rc::gen::container<std::vector<float>>(any_float());
    std::vector<std::uint8_t> e4m3(x.size()), e5m2(x.size());
    std::vector<std::uint16_t> bf16(x.size()), fp16(x.size());
    const auto check = [&] {
        float_to_e4m3(x.data(), e4m3.data(), x.size());
        float_to_e5m2(x.data(), e5m2.data(), x.size());
        float_to_bf16(x.data(), bf16.data(), x.size());
        float_to_fp16(x.data(), fp16.data(), x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            RC_ASSERT(e4m3[i] == float_to_e4m3(x[i]));
            RC_ASSERT(e5m2[i] == float_to_e5m2(x[i]));
            RC_ASSERT(bf16[i] == float_to_bf16(x[i]));
            RC_ASSERT(fp16[i] == float_to_fp16(x[i]));
        }
    };
    on_scalar_path(check);
    if (avx2_available()) on_avx2_path(check);
}

}  // namespace
}  // namespace msa::test
