// MXFP8 blocks (formats.md section 2, OCP MX v1.0) on both code paths, against a quantiser written here from the
// spec with the search-based encoder of reference_formats.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "formats/cpu_paths.h"
#include "formats/mxfp8.h"
#include "formats/reference_formats.h"

namespace msa::test {
namespace {

constexpr std::size_t kBlock = 32;

const Ladder& e4m3_ladder() {
    static const Ladder ladder = ref_ladder(kRefE4M3);
    return ladder;
}

struct Quantised {
    std::vector<std::uint8_t> values;
    std::vector<std::uint8_t> scales;
};

// Shared exponent floor(log2(amax)) - 8 clamped to [-127, 127]; elements RNE-saturated to E4M3 after dividing by
// 2^exponent (exact in double).
Quantised ref_quantize(const std::vector<float>& x) {
    Quantised q;
    for (std::size_t b = 0; b < x.size() / kBlock; ++b) {
        double amax = 0;
        for (std::size_t i = 0; i < kBlock; ++i) {
            const double a = std::fabs(double{x[b * kBlock + i]});
            if (a > amax) amax = a;
        }
        int exponent = -127;
        if (std::isinf(amax)) {
            exponent = 127;
        } else if (amax > 0) {
            int e = 0;
            std::frexp(amax, &e);  // amax = m * 2^e, m in [0.5, 1)
            exponent = std::clamp(e - 1 - 8, -127, 127);
        }
        q.scales.push_back(static_cast<std::uint8_t>(exponent + 127));
        for (std::size_t i = 0; i < kBlock; ++i) {
            const double scaled = std::ldexp(double{x[b * kBlock + i]}, -exponent);
            const auto code = ref_encode(kRefE4M3, e4m3_ladder(), static_cast<float>(scaled), RefOverflow::saturate);
            const bool negative = std::signbit(x[b * kBlock + i]);
            q.values.push_back(code ? static_cast<std::uint8_t>(*code) : (negative ? 0xFF : 0x7F));
        }
    }
    return q;
}

Quantised library_quantize(const std::vector<float>& x) {
    Quantised q{std::vector<std::uint8_t>(x.size()), std::vector<std::uint8_t>(x.size() / kBlock)};
    mxfp8_quantize(x.data(), x.size(), q.values.data(), q.scales.data());
    return q;
}

std::vector<float> varied_blocks(std::size_t blocks, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> log_scale(std::log(1e-38f), std::log(1e37f));
    std::uniform_int_distribution<int> pick(0, 31);
    std::vector<float> x(blocks * kBlock);
    for (std::size_t b = 0; b < blocks; ++b) {
        float* block = x.data() + b * kBlock;
        const float scale = std::exp(log_scale(rng));
        for (std::size_t i = 0; i < kBlock; ++i) block[i] = normal(rng) * scale;
        switch (b % 6) {
            case 1:
                block[pick(rng)] = std::ldexp(1.0f, pick(rng) - 16);
                break;  // a power of two
            case 2:
                for (std::size_t i = 0; i < kBlock; ++i) block[i] = 0.0f;
                break;
            case 3:
                block[pick(rng)] = std::numeric_limits<float>::quiet_NaN();
                break;
            case 4:
                block[pick(rng)] = std::numeric_limits<float>::denorm_min() * static_cast<float>(pick(rng));
                break;
            case 5:
                block[pick(rng)] = std::numeric_limits<float>::infinity();
                break;
            default:
                break;
        }
    }
    return x;
}

TEST(Mxfp8Quantize, MatchesTheOcpRuleOnVariedBlocks) {
    const std::vector<float> x = varied_blocks(3000, 1);
    const Quantised expected = ref_quantize(x);
    on_every_path([&] {
        const Quantised q = library_quantize(x);
        for (std::size_t b = 0; b < expected.scales.size(); ++b) {
            ASSERT_EQ(q.scales[b], expected.scales[b]) << "block " << b;
            for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i) {
                ASSERT_EQ(q.values[i], expected.values[i]) << "element " << i << " x=" << x[i];
            }
        }
    });
}

TEST(Mxfp8Quantize, ScaleRule) {
    EXPECT_EQ(mxfp8_scale_code(0.0f), 0);
    EXPECT_EQ(mxfp8_scale_code(256.0f), 127);  // 2^8: exponent 0
    EXPECT_EQ(mxfp8_scale_code(511.99f), 127);
    EXPECT_EQ(mxfp8_scale_code(512.0f), 128);
    EXPECT_EQ(mxfp8_scale_code(1.0f), 119);
    EXPECT_EQ(mxfp8_scale_code(0x1p-119f), 0);  // -119 - 8 = -127
    EXPECT_EQ(mxfp8_scale_code(0x1p-118f), 1);
    EXPECT_EQ(mxfp8_scale_code(1e-42f), 0);                                         // subnormal amax: clamped
    EXPECT_EQ(mxfp8_scale_code(std::numeric_limits<float>::max()), 127 - 8 + 127);  // floor(log2(max)) = 127
    EXPECT_EQ(mxfp8_scale_code(std::numeric_limits<float>::infinity()), 254);
}

TEST(Mxfp8Quantize, TheLargestElementLandsIn256To448) {
    // With exponent floor(log2(amax)) - 8 the largest element scales into [256, 512) and saturates above 448.
    on_every_path([] {
        std::vector<float> x(kBlock, 0.0f);
        for (const float top : {1.0f, 1.5f, 1.75f, 1.8f, 1.99f}) {
            x[7] = top * 1024.0f;  // exponent 10 - 8 = 2
            x[8] = -top;
            const Quantised q = library_quantize(x);
            EXPECT_EQ(q.scales[0], 127 + 2);
            const double expected = std::min(top * 256.0, 448.0);
            EXPECT_NEAR(ref_decode(kRefE4M3, q.values[7]), expected, expected / 16);
            EXPECT_LE(ref_decode(kRefE4M3, q.values[7]), 448.0);
            EXPECT_NEAR(ref_decode(kRefE4M3, q.values[8]), -top / 4.0, top / 64.0) << "scaled by the same 2^-2";
        }
    });
}

TEST(Mxfp8Dequantize, IsTheCodeTimesThePowerOfTwo) {
    std::vector<std::uint8_t> values, scales;
    for (int s = 0; s < 256; ++s) {
        scales.push_back(static_cast<std::uint8_t>(s));
        for (std::size_t i = 0; i < kBlock; ++i) values.push_back(static_cast<std::uint8_t>((s * 37 + i * 8) % 256));
    }
    on_every_path([&] {
        std::vector<float> out(values.size());
        mxfp8_dequantize(values.data(), scales.data(), values.size(), out.data());
        for (std::size_t i = 0; i < values.size(); ++i) {
            const int s = scales[i / kBlock];
            const double v = ref_decode(kRefE4M3, values[i]);
            // One rounding to float (a product below 2^-126 becomes a float subnormal).
            const float expected =
                s == 255 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(std::ldexp(v, s - 127));
            ASSERT_TRUE(same_float(out[i], expected)) << "element " << i;
        }
    });
}

TEST(Mxfp8, LengthsMustBeWholeBlocks) {
    std::vector<float> x(64, 1.0f);
    std::vector<std::uint8_t> bytes(64);
    on_every_path([&] {
        EXPECT_THROW(mxfp8_quantize(x.data(), 16, bytes.data(), bytes.data()), Error);
        EXPECT_THROW(mxfp8_dequantize(bytes.data(), bytes.data(), 33, x.data()), Error);
    });
}

}  // namespace
}  // namespace msa::test
