// NVFP4 blocks (formats.md sections 2-4) on both code paths, against a quantiser written here from the spec with the
// search-based encoders of reference_formats.h.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "formats/cpu_paths.h"
#include "formats/format_tables.h"
#include "formats/nvfp4.h"
#include "formats/reference_formats.h"

namespace msa::test {
namespace {

constexpr std::size_t kBlock = 16;
constexpr float kInf = std::numeric_limits<float>::infinity();

const Ladder& e4m3_ladder() {
    static const Ladder ladder = ref_ladder(kRefE4M3);
    return ladder;
}
const Ladder& e2m1_ladder() {
    static const Ladder ladder = ref_ladder(kRefE2M1);
    return ladder;
}

// E2M1 code of y, nearest with ties to even; NaN and zero results give code 0.
std::uint8_t ref_e2m1(float y) {
    const auto code = ref_encode(kRefE2M1, e2m1_ladder(), y, RefOverflow::saturate);
    if (!code || (*code & 0x7u) == 0) return 0;
    return static_cast<std::uint8_t>(*code);
}

std::uint8_t ref_e4m3_saturate(float x) {
    const auto code = ref_encode(kRefE4M3, e4m3_ladder(), x, RefOverflow::saturate);
    return code ? static_cast<std::uint8_t>(*code) : 0x7F;
}

struct Quantised {
    std::vector<std::uint8_t> codes;  // one per element, unpacked
    std::vector<std::uint8_t> scales;
};

// formats.md section 3, step by step.
Quantised ref_quantize_kv(const std::vector<float>& x) {
    Quantised q;
    for (std::size_t b = 0; b < x.size() / kBlock; ++b) {
        float amax = 1e-12f;
        for (std::size_t i = 0; i < kBlock; ++i) {
            const float a = std::fabs(x[b * kBlock + i]);
            if (a > amax) amax = a;  // NaN ignored
        }
        std::uint8_t scale_code = ref_e4m3_saturate(amax / 6.0f);
        if (scale_code == 0) scale_code = 1;  // clamp to 2^-9
        const auto scale = static_cast<float>(ref_decode(kRefE4M3, scale_code));
        q.scales.push_back(scale_code);
        for (std::size_t i = 0; i < kBlock; ++i) q.codes.push_back(ref_e2m1(x[b * kBlock + i] / scale));
    }
    return q;
}

Quantised unpack(const std::vector<std::uint8_t>& packed, const std::vector<std::uint8_t>& scales) {
    Quantised q;
    q.scales = scales;
    for (std::uint8_t byte : packed) {
        q.codes.push_back(byte & 0xF);
        q.codes.push_back(static_cast<std::uint8_t>(byte >> 4));
    }
    return q;
}

Quantised library_quantize_kv(const std::vector<float>& x) {
    std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / kBlock);
    nvfp4_quantize(x.data(), x.size(), packed.data(), scales.data());
    return unpack(packed, scales);
}

void expect_same(const Quantised& actual, const Quantised& expected, const std::vector<float>& x) {
    ASSERT_EQ(actual.scales.size(), expected.scales.size());
    for (std::size_t b = 0; b < expected.scales.size(); ++b) {
        EXPECT_EQ(actual.scales[b], expected.scales[b]) << "scale of block " << b;
        for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i) {
            EXPECT_EQ(actual.codes[i], expected.codes[i])
                << "element " << i << " x=" << x[i] << " (bits " << std::hex << bits_of(x[i]) << ")";
        }
        if (::testing::Test::HasFailure()) return;
    }
}

// Blocks of many shapes: Gaussian at scales from 1e-9 to 1e5, heavy tails, one spike, all zero, -0, values exactly on
// ladder thresholds, huge values that saturate the scale, and NaN/inf/subnormal entries.
std::vector<float> varied_blocks(std::size_t blocks, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> log_scale(std::log(1e-9f), std::log(1e5f));
    std::uniform_int_distribution<int> pick(0, 15);
    const float thresholds[] = {0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    std::vector<float> x(blocks * kBlock);
    for (std::size_t b = 0; b < blocks; ++b) {
        float* block = x.data() + b * kBlock;
        const float scale = std::exp(log_scale(rng));
        const int kind = static_cast<int>(b % 8);
        for (std::size_t i = 0; i < kBlock; ++i) {
            block[i] = normal(rng) * scale;
            if (kind == 1) block[i] = normal(rng) / (std::fabs(normal(rng)) + 0.05f) * scale;
            if (kind == 2) block[i] = 0.0f;
            if (kind == 3) block[i] = -0.0f;
        }
        if (kind == 2) block[pick(rng)] = scale;
        if (kind == 4) {  // thresholds times a representable scale, with amax / 6 == that scale exactly
            const auto s = static_cast<float>(ref_decode(kRefE4M3, static_cast<std::uint32_t>(8 + pick(rng) * 7)));
            for (std::size_t i = 0; i < kBlock; ++i) {
                block[i] = thresholds[static_cast<std::size_t>(pick(rng)) % 9] * s * (pick(rng) % 2 ? 1.0f : -1.0f);
            }
            block[0] = 6.0f * s;
        }
        if (kind == 5) block[pick(rng)] *= 1e7f;
        if (kind == 6) {
            const float specials[] = {std::numeric_limits<float>::quiet_NaN(),  kInf,    -kInf,
                                      std::numeric_limits<float>::denorm_min(), -1e-40f, 3e38f};
            block[pick(rng)] = specials[static_cast<std::size_t>(pick(rng)) % 6];
        }
    }
    return x;
}

TEST(Nvfp4Quantize, MatchesTheSpecOnVariedBlocks) {
    const std::vector<float> x = varied_blocks(4000, 1);
    const Quantised expected = ref_quantize_kv(x);
    on_every_path([&] { expect_same(library_quantize_kv(x), expected, x); });
}

TEST(Nvfp4Quantize, LadderThresholdsExactly) {
    // A block holding 6 has scale exactly 1, so y == x and every threshold of formats.md section 3 step 3 is hit.
    struct Step {
        float threshold;
        std::uint8_t at, below, above;
    };
    const Step ladder[] = {{0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
                           {2.5f, 4, 4, 5},  {3.5f, 6, 5, 6},  {5.0f, 6, 6, 7},  {6.0f, 7, 7, 7}};
    on_every_path([&] {
        for (const Step& step : ladder) {
            for (const float sign : {1.0f, -1.0f}) {
                std::vector<float> x(kBlock, 0.0f);
                x[0] = 6.0f;
                x[1] = sign * step.threshold;
                x[2] = sign * std::nextafter(step.threshold, 0.0f);
                x[3] = sign * std::nextafter(step.threshold, kInf);
                const Quantised q = library_quantize_kv(x);
                const std::uint8_t sign_bit = sign < 0 ? 8 : 0;
                const auto with_sign = [&](std::uint8_t m) { return m == 0 ? 0 : m | sign_bit; };
                EXPECT_EQ(q.scales[0], 0x38) << "scale 1.0";
                EXPECT_EQ(q.codes[1], with_sign(step.at)) << "at " << x[1];
                EXPECT_EQ(q.codes[2], with_sign(step.below)) << "just below " << x[1];
                EXPECT_EQ(q.codes[3], with_sign(step.above)) << "just above " << x[1];
            }
        }
    });
}

TEST(Nvfp4Quantize, ScaleRule) {
    EXPECT_EQ(nvfp4_scale_code(6.0f), 0x38);    // 1.0
    EXPECT_EQ(nvfp4_scale_code(6.375f), 0x38);  // 1.0625: midpoint of 1 and 1.125, to even
    EXPECT_EQ(nvfp4_scale_code(std::nextafter(6.375f, kInf)), 0x39);
    EXPECT_EQ(nvfp4_scale_code(6.0f * 448.0f), 0x7E);  // 448
    EXPECT_EQ(nvfp4_scale_code(1e30f), 0x7E);          // clamped to 448
    EXPECT_EQ(nvfp4_scale_code(kInf), 0x7E);
    EXPECT_EQ(nvfp4_scale_code(0.0f), 0x01);             // clamped to 2^-9
    EXPECT_EQ(nvfp4_scale_code(6.0f * 0x1p-10f), 0x01);  // rounds to 0, clamped up
    EXPECT_EQ(nvfp4_scale_code(6.0f * 0x1p-9f), 0x01);
    EXPECT_EQ(nvfp4_scale_code(6.0f * 0x1p-8f), 0x02);
    EXPECT_EQ(nvfp4_scale_code(std::numeric_limits<float>::quiet_NaN()), 0x01);
    // The rule in general: E4M3_RN(max(amax, 1e-12) / 6) clamped to [2^-9, 448].
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> log_amax(std::log(1e-6f), std::log(1e4f));
    for (int i = 0; i < 100000; ++i) {
        const float amax = std::exp(log_amax(rng));
        const std::uint8_t expected = std::max<std::uint8_t>(ref_e4m3_saturate(amax / 6.0f), 1);
        ASSERT_EQ(nvfp4_scale_code(amax), expected) << amax;
    }
}

TEST(Nvfp4Quantize, ZeroAndNegativeZeroAreCodeZero) {
    on_every_path([] {
        std::vector<float> x(2 * kBlock, -0.0f);
        for (std::size_t i = kBlock; i < 2 * kBlock; ++i) x[i] = i % 2 ? -1e-30f : 0.0f;
        const Quantised q = library_quantize_kv(x);
        for (std::uint8_t c : q.codes) EXPECT_EQ(c, 0);
        EXPECT_EQ(q.scales[0], 0x01);
        EXPECT_EQ(q.scales[1], 0x01);
    });
}

TEST(Nvfp4Quantize, PacksElement2iInTheLowNibble) {
    on_every_path([] {
        std::vector<float> x(kBlock, 0.0f);
        x[0] = 6.0f;    // code 7, low nibble of byte 0
        x[1] = 0.5f;    // code 1, high nibble of byte 0
        x[14] = -1.5f;  // code 0xB, low nibble of byte 7
        x[15] = -3.0f;  // code 0xD, high nibble of byte 7
        std::uint8_t packed[8];
        std::uint8_t scale = 0;
        nvfp4_quantize(x.data(), kBlock, packed, &scale);
        EXPECT_EQ(packed[0], 0x17);
        EXPECT_EQ(packed[7], 0xDB);
        for (int i = 1; i < 7; ++i) EXPECT_EQ(packed[i], 0);
        EXPECT_EQ(nvfp4_code(packed, 0), 7);
        EXPECT_EQ(nvfp4_code(packed, 1), 1);
        EXPECT_EQ(nvfp4_code(packed, 14), 0xB);
        EXPECT_EQ(nvfp4_code(packed, 15), 0xD);
    });
}

TEST(Nvfp4Codes, SetCodeChangesOnlyItsNibble) {
    std::uint8_t packed[8] = {};
    for (std::size_t i = 0; i < kBlock; ++i) nvfp4_set_code(packed, i, static_cast<std::uint8_t>(i));
    for (std::size_t i = 0; i < kBlock; ++i) EXPECT_EQ(nvfp4_code(packed, i), i);
    nvfp4_set_code(packed, 5, 0xF);
    EXPECT_EQ(nvfp4_code(packed, 4), 4);
    EXPECT_EQ(nvfp4_code(packed, 5), 0xF);
    EXPECT_EQ(packed[2], 0xF4);
}

TEST(Nvfp4Quantize, DequantisedErrorIsAtMostOneScaleStep) {
    // The widest E2M1 gap is 2 (4 to 6), so an element within the ladder lands within one scale of its input. With a
    // normal E4M3 scale (>= 2^-6) the scale is amax / 6 rounded with 3 mantissa bits, so |y| <= 6.4 and every element
    // is within the ladder; a subnormal scale may be rounded down by more, and elements past 6 * scale saturate to 6.
    const std::vector<float> x = varied_blocks(2000, 2);
    on_every_path([&] {
        std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / kBlock);
        std::vector<float> y(x.size());
        nvfp4_quantize(x.data(), x.size(), packed.data(), scales.data());
        nvfp4_dequantize(packed.data(), scales.data(), x.size(), 1.0f, y.data());
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (!std::isfinite(x[i])) continue;
            const double scale = ref_decode(kRefE4M3, scales[i / kBlock]);
            double block_amax = 0;
            for (std::size_t j = i / kBlock * kBlock; j < (i / kBlock + 1) * kBlock; ++j) {
                block_amax = std::max(block_amax, std::isfinite(x[j]) ? std::fabs(double{x[j]}) : kInf);
            }
            if (std::isinf(block_amax) || block_amax > 6 * 448) continue;  // the scale saturated: no bound
            const double error = std::fabs(double{x[i]} - y[i]);
            ASSERT_LE(error, std::max(scale, std::fabs(double{x[i]}) - 6 * scale) * (1 + 1e-6)) << "element " << i;
            if (scale >= 0x1p-6) {
                ASSERT_LE(error, scale * (1 + 1e-6)) << "element " << i;
            }
            ASSERT_LE(scale, block_amax / 6 * 1.0625 + 0x1p-9) << "the scale is amax / 6 rounded";
        }
    });
}

// ---- Dequantisation -----------------------------------------------------------------------------------------------

// Every packed byte value under every scale code.
struct AllCodes {
    std::vector<std::uint8_t> packed;
    std::vector<std::uint8_t> scales;
    std::size_t n;
};

AllCodes every_code_under_every_scale() {
    AllCodes all;
    for (int scale = 0; scale < 256; ++scale) {
        for (int byte = 0; byte < 256; byte += 8) {
            all.scales.push_back(static_cast<std::uint8_t>(scale));
            for (int j = 0; j < 8; ++j) all.packed.push_back(static_cast<std::uint8_t>(byte + j));
        }
    }
    all.n = all.packed.size() * 2;
    return all;
}

TEST(Nvfp4Dequantize, ExactProductTimesGlobalScale) {
    const AllCodes all = every_code_under_every_scale();
    for (const float global : {1.0f, 0.0123f, 3.0e-5f}) {
        on_every_path([&] {
            std::vector<float> out(all.n);
            nvfp4_dequantize(all.packed.data(), all.scales.data(), all.n, global, out.data());
            for (std::size_t i = 0; i < all.n; ++i) {
                const double e2m1 = ref_decode(kRefE2M1, nvfp4_code(all.packed.data(), i));
                const double scale = ref_decode(kRefE4M3, all.scales[i / kBlock]);
                // e2m1 * scale * global is exact in double; one rounding to float follows.
                const auto expected = static_cast<float>(e2m1 * scale * global);
                ASSERT_TRUE(same_float(out[i], expected)) << "element " << i << " global " << global;
            }
        });
    }
}

TEST(Nvfp4Dequantize, ToE4M3RoundsTheExactProductOnce) {
    const AllCodes all = every_code_under_every_scale();
    on_every_path([&] {
        std::vector<std::uint8_t> out(all.n);
        nvfp4_dequantize_to_e4m3(all.packed.data(), all.scales.data(), all.n, out.data());
        for (std::size_t i = 0; i < all.n; ++i) {
            const double product =
                ref_decode(kRefE2M1, nvfp4_code(all.packed.data(), i)) * ref_decode(kRefE4M3, all.scales[i / kBlock]);
            if (std::isnan(product)) {
                ASSERT_EQ(out[i] & 0x7F, 0x7F) << "NaN scale gives a NaN code";
                continue;
            }
            ASSERT_EQ(out[i], ref_e4m3_saturate(static_cast<float>(product))) << "element " << i;
        }
    });
}

TEST(Nvfp4Dequantize, ProductTableMatchesTheRule) {
    for (int scale = 0; scale < 256; ++scale) {
        for (int code = 0; code < 16; ++code) {
            const double product = ref_decode(kRefE2M1, static_cast<std::uint32_t>(code)) *
                                   ref_decode(kRefE4M3, static_cast<std::uint32_t>(scale));
            const std::uint8_t entry =
                kNvfp4E4M3Product[static_cast<std::size_t>(scale)][static_cast<std::size_t>(code)];
            if (std::isnan(product)) {
                EXPECT_EQ(entry & 0x7F, 0x7F);
            } else {
                EXPECT_EQ(entry, ref_e4m3_saturate(static_cast<float>(product))) << scale << " " << code;
            }
        }
    }
}

// ---- Weights and activations --------------------------------------------------------------------------------------

TEST(Nvfp4Weights, ModelOptRule) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> w(64 * kBlock);
    for (float& v : w) v = normal(rng);
    for (std::size_t i = 0; i < kBlock; ++i) w[3 * kBlock + i] = 0.0f;  // an all-zero block: scale 1
    w[100] = 0.5f;                                                      // the tensor's amax
    // Global scale amax / 2688; per block E4M3_RN(block_amax / (6 * global)); codes E2M1_RN(x / (scale * global)).
    const float global = 0.5f / 2688.0f;
    std::vector<std::uint8_t> expected_scales, expected_codes;
    for (std::size_t b = 0; b < w.size() / kBlock; ++b) {
        float block_amax = 0.0f;
        for (std::size_t i = 0; i < kBlock; ++i) block_amax = std::max(block_amax, std::fabs(w[b * kBlock + i]));
        const float scale_value = block_amax == 0.0f ? 1.0f : block_amax / (6.0f * global);
        const std::uint8_t code = ref_e4m3_saturate(scale_value);
        expected_scales.push_back(code);
        const float divisor = static_cast<float>(ref_decode(kRefE4M3, code)) * global;
        for (std::size_t i = 0; i < kBlock; ++i) expected_codes.push_back(ref_e2m1(w[b * kBlock + i] / divisor));
    }
    std::vector<std::uint8_t> packed(w.size() / 2), scales(w.size() / kBlock);
    EXPECT_EQ(nvfp4_quantize_weight(w.data(), w.size(), packed.data(), scales.data()), global);
    EXPECT_EQ(scales, expected_scales);
    EXPECT_EQ(unpack(packed, scales).codes, expected_codes);
    EXPECT_EQ(scales[3], 0x38);
    // And the result dequantises close to the input: within one step of the block's scale.
    std::vector<float> back(w.size());
    nvfp4_dequantize(packed.data(), scales.data(), w.size(), global, back.data());
    for (std::size_t i = 0; i < w.size(); ++i) {
        EXPECT_LE(std::fabs(back[i] - w[i]), ref_decode(kRefE4M3, scales[i / kBlock]) * global * 1.0001);
    }
}

TEST(Nvfp4Weights, ZeroTensorAndTinyBlocks) {
    std::vector<float> w(2 * kBlock, 0.0f);
    std::vector<std::uint8_t> packed(kBlock), scales(2);
    EXPECT_EQ(nvfp4_quantize_weight(w.data(), w.size(), packed.data(), scales.data()), 1.0f);
    for (std::uint8_t p : packed) EXPECT_EQ(p, 0);
    // A block 1e-7 times smaller than the tensor's amax: its ModelOpt scale rounds to E4M3 zero; we keep 2^-9.
    w[0] = 1.0f;
    w[kBlock] = 1e-7f;
    nvfp4_quantize_weight(w.data(), w.size(), packed.data(), scales.data());
    EXPECT_EQ(scales[1], 0x01);
    EXPECT_EQ(nvfp4_code(packed.data(), kBlock), 0) << "1e-7 / (2^-9 / 2688) = 0.14, rounds to 0";
}

TEST(Nvfp4Activations, RowScaleThenKvRule) {
    const std::vector<float> x = varied_blocks(512, 4);
    for (const float row_scale : {16.0f, 2688.0f / 3.7f, 1.0f / 3.0f}) {
        std::vector<float> scaled(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) scaled[i] = x[i] * row_scale;
        const Quantised expected = ref_quantize_kv(scaled);
        on_every_path([&] {
            std::vector<std::uint8_t> packed(x.size() / 2), scales(x.size() / kBlock);
            nvfp4_quantize_activation_row(x.data(), x.size(), row_scale, packed.data(), scales.data());
            expect_same(unpack(packed, scales), expected, scaled);
        });
    }
}

TEST(Nvfp4, LengthsMustBeWholeBlocks) {
    std::vector<float> x(32, 1.0f);
    std::vector<std::uint8_t> bytes(32);
    on_every_path([&] {
        EXPECT_THROW(nvfp4_quantize(x.data(), 17, bytes.data(), bytes.data()), Error);
        EXPECT_THROW(nvfp4_quantize_activation_row(x.data(), 8, 1.0f, bytes.data(), bytes.data()), Error);
        EXPECT_THROW(nvfp4_quantize_weight(x.data(), 31, bytes.data(), bytes.data()), Error);
        EXPECT_THROW(nvfp4_dequantize(bytes.data(), bytes.data(), 20, 1.0f, x.data()), Error);
        EXPECT_THROW(nvfp4_dequantize_to_e4m3(bytes.data(), bytes.data(), 1, bytes.data()), Error);
    });
}

}  // namespace
}  // namespace msa::test
