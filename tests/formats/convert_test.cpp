// The bulk conversions of convert.h: on both the scalar and the AVX2 path they equal the scalar reference functions
// bit for bit: every 16-bit and 8-bit input, and large float sets (every bf16/fp16/fp8 code, every midpoint between
// neighbouring codes and its neighbours, every float whose low 16 bits are a rounding boundary, random bits).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/convert.h"
#include "formats/cpu_paths.h"
#include "formats/library_formats.h"
#include "formats/scalar_formats.h"

namespace msa::test {
namespace {

// Float inputs that exercise every rounding decision of the narrowing conversions.
std::vector<float> narrowing_probe_inputs() {
    std::vector<std::uint32_t> bits;
    // Every upper half with the low 16 bits at and around the BF16 rounding boundary, and at the extremes.
    for (std::uint32_t high = 0; high < 0x10000u; ++high) {
        for (std::uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
            bits.push_back(high << 16 | low);
        }
    }
    // Every code of the narrower formats, every midpoint between neighbours, and the floats next to both.
    for (const LibraryFormat& f : library_formats()) {
        const Ladder ladder = ref_ladder(*f.spec);
        for (std::size_t i = 0; i < ladder.values.size(); ++i) {
            const auto v = static_cast<float>(ladder.values[i]);
            const auto mid =
                static_cast<float>(i + 1 < ladder.values.size() ? (ladder.values[i] + ladder.values[i + 1]) / 2
                                                                : ladder.values[i] * 1.0625);
            for (const float x : {v, mid}) {
                for (const float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, 1e38f)}) {
                    bits.push_back(bits_of(y));
                    bits.push_back(bits_of(-y));
                }
            }
        }
    }
    std::mt19937 rng(11);
    for (int i = 0; i < (1 << 20); ++i) bits.push_back(static_cast<std::uint32_t>(rng()));
    std::vector<float> floats(bits.size());
    std::memcpy(floats.data(), bits.data(), bits.size() * sizeof(float));
    return floats;
}

const std::vector<float>& probe_inputs() {
    static const std::vector<float> inputs = narrowing_probe_inputs();
    return inputs;
}

template <typename T>
std::vector<T> every_code() {
    std::vector<T> codes(std::size_t{1} << (8 * sizeof(T)));
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<T>(i);
    return codes;
}

// Runs bulk(in, out, n) on the current path over `in` at several offsets and lengths (to reach every tail length
// and misaligned starts) and compares each output element with reference(in[i]), bit for bit.
template <typename In, typename Out, typename Bulk, typename Reference>
void expect_bulk_equals_reference(const std::vector<In>& in, Bulk bulk, Reference reference, const char* name) {
    std::vector<Out> out(in.size());
    bulk(in.data(), out.data(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        const Out expected = reference(in[i]);
        ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(Out)), 0) << name << ": element " << i << " differs";
    }
    for (std::size_t offset = 0; offset < 3; ++offset) {
        for (std::size_t n = 0; n <= 40 && offset + n <= in.size(); ++n) {
            std::vector<Out> part(n + 1, Out{});
            const Out sentinel = part[n];
            bulk(in.data() + offset, part.data(), n);
            ASSERT_EQ(std::memcmp(&part[n], &sentinel, sizeof(Out)), 0) << name << ": wrote past n=" << n;
            for (std::size_t i = 0; i < n; ++i) {
                const Out expected = reference(in[offset + i]);
                ASSERT_EQ(std::memcmp(&part[i], &expected, sizeof(Out)), 0)
                    << name << ": offset " << offset << " n " << n << " element " << i;
            }
        }
    }
}

void check_every_conversion() {
    const auto u16 = every_code<std::uint16_t>();
    const auto u8 = every_code<std::uint8_t>();
    const std::vector<float>& floats = probe_inputs();

    expect_bulk_equals_reference<std::uint16_t, float>(
        u16, [](auto... a) { bf16_to_float(a...); }, [](std::uint16_t b) { return bf16_to_float(b); }, "bf16_to_float");
    expect_bulk_equals_reference<std::uint16_t, float>(
        u16, [](auto... a) { fp16_to_float(a...); }, [](std::uint16_t h) { return fp16_to_float(h); }, "fp16_to_float");
    expect_bulk_equals_reference<std::uint8_t, float>(
        u8, [](auto... a) { e4m3_to_float(a...); }, [](std::uint8_t c) { return e4m3_to_float(c); }, "e4m3_to_float");
    expect_bulk_equals_reference<std::uint8_t, float>(
        u8, [](auto... a) { e5m2_to_float(a...); }, [](std::uint8_t c) { return e5m2_to_float(c); }, "e5m2_to_float");
    expect_bulk_equals_reference<std::uint16_t, std::uint8_t>(
        u16, [](auto... a) { bf16_to_e4m3(a...); },
        [](std::uint16_t b) { return float_to_e4m3(bf16_to_float(b), Overflow::saturate); }, "bf16_to_e4m3");
    expect_bulk_equals_reference<float, std::uint16_t>(
        floats, [](auto... a) { float_to_bf16(a...); }, [](float x) { return float_to_bf16(x); }, "float_to_bf16");
    expect_bulk_equals_reference<float, std::uint16_t>(
        floats, [](auto... a) { float_to_fp16(a...); }, [](float x) { return float_to_fp16(x, Overflow::ieee); },
        "float_to_fp16");
    expect_bulk_equals_reference<float, std::uint8_t>(
        floats, [](auto... a) { float_to_e4m3(a...); }, [](float x) { return float_to_e4m3(x, Overflow::saturate); },
        "float_to_e4m3");
    expect_bulk_equals_reference<float, std::uint8_t>(
        floats, [](auto... a) { float_to_e5m2(a...); }, [](float x) { return float_to_e5m2(x, Overflow::saturate); },
        "float_to_e5m2");
}

TEST(BulkConvert, ScalarPathEqualsTheScalarFunctions) {
    on_scalar_path([] { check_every_conversion(); });
}

TEST(BulkConvert, Avx2PathEqualsTheScalarFunctions) {
    if (!avx2_available()) GTEST_SKIP() << "this CPU has no AVX2/F16C (or MSA_FORCE_SCALAR is set)";
    on_avx2_path([] { check_every_conversion(); });
}

}  // namespace
}  // namespace msa::test
