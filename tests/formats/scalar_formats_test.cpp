// The scalar formats against the independent model of reference_formats.h: every code of every format decoded,
// every code re-encoded, every midpoint between neighbours, overflow and saturation, NaN, and random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "formats/format_tables.h"
#include "formats/library_formats.h"
#include "formats/scalar_formats.h"

namespace msa::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string mode_name(Overflow o) {
    return o == Overflow::saturate ? "saturate" : "ieee";
}

void expect_encodes_to(const LibraryFormat& f, const Ladder& ladder, float x, Overflow mode) {
    const ExpectedCode expected = expected_code(f, ladder, x, mode);
    const std::uint32_t code = f.encode(x, mode);
    if (expected.is_nan) {
        EXPECT_TRUE(ref_is_nan_code(*f.spec, code) && ((code & f.spec->sign_bit()) != 0) == std::signbit(x))
            << f.spec->name << " " << mode_name(mode) << " x=" << x << " bits=" << std::hex << bits_of(x) << " gave "
            << code << ", expected a NaN code with the input's sign";
    } else {
        EXPECT_EQ(code, expected.code) << f.spec->name << " " << mode_name(mode) << " x=" << x << " bits=" << std::hex
                                       << bits_of(x);
    }
}

TEST(ScalarFormats, DecodeOfEveryCodeMatchesTheFormula) {
    for (const LibraryFormat& f : library_formats()) {
        for (std::uint32_t code = 0; code < f.spec->code_count(); ++code) {
            ASSERT_TRUE(same_value(f.decode(code), ref_decode(*f.spec, code)))
                << f.spec->name << " code " << std::hex << code << " decoded to " << f.decode(code);
        }
    }
}

TEST(ScalarFormats, DecodedNaNsAreQuietAndKeepTheSign) {
    EXPECT_EQ(bits_of(e4m3_to_float(0x7F)), 0x7FC00000u);
    EXPECT_EQ(bits_of(e4m3_to_float(0xFF)), 0xFFC00000u);
    EXPECT_EQ(bits_of(fp16_to_float(0x7C01)), 0x7FC02000u);  // a signalling FP16 NaN becomes quiet
    EXPECT_EQ(bits_of(fp16_to_float(0xFE00)), 0xFFC00000u);
    EXPECT_EQ(bits_of(e5m2_to_float(0x7D)), 0x7FE00000u);
    EXPECT_EQ(bits_of(ue8m0_to_float(0xFF)), 0x7FC00000u);
    EXPECT_EQ(bits_of(bf16_to_float(0x7F81)), 0x7F810000u);  // widening BF16 is a plain shift
}

TEST(ScalarFormats, EncodeOfDecodeIsTheIdentityForEveryNonNaNCode) {
    for (const LibraryFormat& f : library_formats()) {
        for (std::uint32_t code = 0; code < f.spec->code_count(); ++code) {
            const double value = ref_decode(*f.spec, code);
            if (std::isnan(value)) continue;
            for (Overflow mode : f.modes) {
                if (std::isinf(value) && mode == Overflow::saturate) continue;  // inf saturates: checked below
                std::uint32_t expected = code;
                if (f.spec == &kRefE2M1 && code == 0x8) expected = 0;  // -0 is stored as +0
                ASSERT_EQ(f.encode(f.decode(code), mode), expected) << f.spec->name << " " << mode_name(mode);
            }
        }
    }
}

TEST(ScalarFormats, MidpointsRoundToTheEvenCodeAndNeighboursToTheNearest) {
    for (const LibraryFormat& f : library_formats()) {
        const Ladder ladder = ref_ladder(*f.spec);
        for (std::size_t i = 0; i + 1 < ladder.values.size(); ++i) {
            const double mid = (ladder.values[i] + ladder.values[i + 1]) / 2;
            const float mid_f = static_cast<float>(mid);
            ASSERT_EQ(static_cast<double>(mid_f), mid) << "midpoints of these formats are floats";
            const std::uint32_t even = (ladder.codes[i] & 1u) == 0 ? ladder.codes[i] : ladder.codes[i + 1];
            for (const float sign : {1.0f, -1.0f}) {
                const std::uint32_t sign_bit = sign < 0 ? f.spec->sign_bit() : 0u;
                const auto signed_code = [&](std::uint32_t magnitude) {
                    const bool e2m1_zero = f.spec == &kRefE2M1 && magnitude == 0;
                    return e2m1_zero ? 0u : (sign_bit | magnitude);
                };
                for (Overflow mode : f.modes) {
                    EXPECT_EQ(f.encode(sign * mid_f, mode), signed_code(even))
                        << f.spec->name << " midpoint " << sign * mid_f;
                    EXPECT_EQ(f.encode(sign * std::nextafter(mid_f, kInf), mode), signed_code(ladder.codes[i + 1]))
                        << f.spec->name << " just above midpoint " << sign * mid_f;
                    EXPECT_EQ(f.encode(sign * std::nextafter(mid_f, 0.0f), mode), signed_code(ladder.codes[i]))
                        << f.spec->name << " just below midpoint " << sign * mid_f;
                }
            }
        }
    }
}

TEST(ScalarFormats, RandomInputsEncodeToTheNearestCode) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::uint32_t> any_bits;
    for (const LibraryFormat& f : library_formats()) {
        const Ladder ladder = ref_ladder(*f.spec);
        const double max = ladder.values.back();
        // Log-uniform over the format's range and a little beyond, both signs, plus arbitrary bit patterns.
        std::uniform_real_distribution<double> log_magnitude(std::log(ladder.values[1] / 8), std::log(max * 4));
        for (int i = 0; i < 100000; ++i) {
            float x = float_of(any_bits(rng));
            if (i % 2 == 0) {
                x = static_cast<float>(std::exp(log_magnitude(rng)));
                if (any_bits(rng) & 1u) x = -x;
            }
            for (Overflow mode : f.modes) {
                expect_encodes_to(f, ladder, x, mode);
            }
            if (HasFailure()) return;
        }
    }
}

TEST(ScalarFormats, SpecialInputsEncodeToTheNearestCode) {
    const float specials[] = {0.0f,
                              -0.0f,
                              kInf,
                              -kInf,
                              std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(),
                              -std::numeric_limits<float>::denorm_min(),
                              float_of(0x00400000u),
                              kNaN,
                              -kNaN,
                              float_of(0x7F800001u),
                              float_of(0xFFBFFFFFu)};
    for (const LibraryFormat& f : library_formats()) {
        const Ladder ladder = ref_ladder(*f.spec);
        for (const float x : specials) {
            for (Overflow mode : f.modes) expect_encodes_to(f, ladder, x, mode);
        }
    }
}

TEST(ScalarFormats, OverflowAndSaturation) {
    const float above_464 = std::nextafter(464.0f, kInf);
    // E4M3: 464 is the midpoint between 448 (even code 0x7E) and the NaN code, so it rounds down in both modes.
    EXPECT_EQ(float_to_e4m3(448.0f, Overflow::saturate), 0x7E);
    EXPECT_EQ(float_to_e4m3(464.0f, Overflow::ieee), 0x7E);
    EXPECT_EQ(float_to_e4m3(above_464, Overflow::ieee), 0x7F);
    EXPECT_EQ(float_to_e4m3(above_464, Overflow::saturate), 0x7E);
    EXPECT_EQ(float_to_e4m3(-1e9f, Overflow::saturate), 0xFE);
    EXPECT_EQ(float_to_e4m3(kInf, Overflow::saturate), 0x7E);
    EXPECT_EQ(float_to_e4m3(kInf, Overflow::ieee), 0x7F);
    EXPECT_EQ(float_to_e4m3(-kInf, Overflow::ieee), 0xFF);
    // E5M2: 61440 is the midpoint between 57344 (odd code 0x7B) and 65536, so it rounds to inf.
    EXPECT_EQ(float_to_e5m2(std::nextafter(61440.0f, 0.0f), Overflow::ieee), 0x7B);
    EXPECT_EQ(float_to_e5m2(61440.0f, Overflow::ieee), 0x7C);
    EXPECT_EQ(float_to_e5m2(61440.0f, Overflow::saturate), 0x7B);
    EXPECT_EQ(float_to_e5m2(kInf, Overflow::saturate), 0x7B);
    EXPECT_EQ(float_to_e5m2(-kInf, Overflow::ieee), 0xFC);
    // FP16: 65520 is the midpoint between 65504 and 65536.
    EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
    EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(float_to_fp16(65520.0f, Overflow::saturate), 0x7BFF);
    EXPECT_EQ(float_to_fp16(-kInf, Overflow::saturate), 0xFBFF);
    // BF16 has no saturating mode: the largest floats round to inf.
    EXPECT_EQ(float_to_bf16(float_of(0x7F7F7FFFu)), 0x7F7F);
    EXPECT_EQ(float_to_bf16(float_of(0x7F7F8000u)), 0x7F80);
    EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
    // E2M1 always saturates and has no NaN.
    EXPECT_EQ(float_to_e2m1(1e30f), 0x7);
    EXPECT_EQ(float_to_e2m1(-kInf), 0xF);
    EXPECT_EQ(float_to_e2m1(kNaN), 0x0);
    EXPECT_EQ(float_to_e2m1(-0.0f), 0x0);
    EXPECT_EQ(float_to_e2m1(-0.25f), 0x0);
    // Underflow keeps the sign (except E2M1).
    EXPECT_EQ(float_to_e4m3(0x1p-10f), 0x00);
    EXPECT_EQ(float_to_e4m3(-0x1p-10f), 0x80);
    EXPECT_EQ(float_to_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
    EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(ScalarFormats, NaNInputsGiveQuietNaNsWithTheSign) {
    EXPECT_EQ(float_to_e4m3(kNaN), 0x7F);
    EXPECT_EQ(float_to_e4m3(-kNaN, Overflow::ieee), 0xFF);
    EXPECT_EQ(float_to_e5m2(-kNaN), 0xFF);
    EXPECT_EQ(float_to_fp16(float_of(0x7F800001u)), 0x7E00);  // signalling -> quiet
    EXPECT_EQ(float_to_fp16(float_of(0xFFA00000u)), 0xFF00);  // upper payload bits kept
    EXPECT_EQ(float_to_bf16(float_of(0x7F800001u)), 0x7FC0);
    EXPECT_EQ(float_to_bf16(float_of(0xFF812345u)), 0xFFC1);
}

// ---- UE8M0 and UE4M3 ----------------------------------------------------------------------------------------------

TEST(ScalarFormats, Ue8m0DecodesEveryCodeAsAPowerOfTwo) {
    for (int code = 0; code < 255; ++code) {
        EXPECT_EQ(static_cast<double>(ue8m0_to_float(static_cast<std::uint8_t>(code))), std::ldexp(1.0, code - 127));
    }
    EXPECT_TRUE(std::isnan(ue8m0_to_float(0xFF)));
}

TEST(ScalarFormats, Ue8m0EncodesToTheNearestPowerOfTwoTiesToEven) {
    for (int code = 0; code < 255; ++code) {
        const float power = std::ldexp(1.0f, code - 127);
        EXPECT_EQ(float_to_ue8m0(power), code);
        EXPECT_EQ(float_to_ue8m0(-power), code) << "the sign is ignored";
        if (code == 254) continue;
        const float mid = power * 1.5f;  // between code and code + 1
        const int even = code % 2 == 0 ? code : code + 1;
        EXPECT_EQ(float_to_ue8m0(mid), even) << "midpoint above code " << code;
        EXPECT_EQ(float_to_ue8m0(std::nextafter(mid, kInf)), code + 1);
        EXPECT_EQ(float_to_ue8m0(std::nextafter(mid, 0.0f)), code);
    }
    EXPECT_EQ(float_to_ue8m0(0.0f), 0) << "clamped to 2^-127";
    EXPECT_EQ(float_to_ue8m0(std::numeric_limits<float>::denorm_min()), 0);
    EXPECT_EQ(float_to_ue8m0(std::numeric_limits<float>::max()), 254) << "clamped to 2^127";
    EXPECT_EQ(float_to_ue8m0(kInf), 254);
    EXPECT_EQ(float_to_ue8m0(kNaN), 0xFF);
}

TEST(ScalarFormats, Ue4m3IsE4M3WithoutTheSign) {
    for (int code = 0; code < 256; ++code) {
        const auto c = static_cast<std::uint8_t>(code);
        EXPECT_TRUE(same_float(ue4m3_to_float(c), e4m3_to_float(static_cast<std::uint8_t>(c & 0x7F))));
        if (code < 0x7F) {
            EXPECT_EQ(float_to_ue4m3(e4m3_to_float(c)), c);
        }
    }
    EXPECT_EQ(float_to_ue4m3(-3.0f), 0);
    EXPECT_EQ(float_to_ue4m3(-0.0f), 0);
    EXPECT_EQ(float_to_ue4m3(kNaN), 0x7F);
    EXPECT_EQ(float_to_ue4m3(-kNaN), 0x7F);
    EXPECT_EQ(float_to_ue4m3(1e6f), 0x7E);
    EXPECT_EQ(float_to_ue4m3(1e6f, Overflow::ieee), 0x7F);
}

// ---- Tables ---------------------------------------------------------------------------------------------------------

TEST(FormatTables, EqualTheScalarDecoders) {
    for (int code = 0; code < 256; ++code) {
        const auto c = static_cast<std::uint8_t>(code);
        EXPECT_TRUE(same_float(kE4M3ToFloat[c], e4m3_to_float(c)));
        EXPECT_TRUE(same_float(kE5M2ToFloat[c], e5m2_to_float(c)));
        EXPECT_TRUE(same_float(kUE8M0ToFloat[c], ue8m0_to_float(c)));
        if (code < 16) {
            EXPECT_TRUE(same_float(kE2M1ToFloat[c], e2m1_to_float(c)));
        }
    }
}

// The functions are usable in constant expressions (tables are built at compile time from them).
static_assert(float_to_e4m3(448.0f) == 0x7E && e4m3_to_float(0x7E) == 448.0f);
static_assert(float_to_bf16(1.0f) == 0x3F80 && fp16_to_float(0x3C00) == 1.0f);

}  // namespace
}  // namespace msa::test
