// Float inputs by the billion through the narrowing bulk conversions, AVX2 path against the scalar reference
// functions. By default every 17th run of 65,536 consecutive bit patterns (2.5e8 inputs per conversion: every low
// half with 3,856 upper halves, about 5 s of CPU); MSA_EXHAUSTIVE_FULL=1 checks all 2^32 (about 80 s of CPU).
// Labelled `slow`, so it runs in the release build only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "formats/convert.h"
#include "formats/cpu_paths.h"
#include "formats/scalar_formats.h"

namespace msa::test {
namespace {

constexpr std::size_t kChunk = 1 << 16;

std::uint64_t chunk_stride() {
    const char* full = std::getenv("MSA_EXHAUSTIVE_FULL");
    return full != nullptr && full[0] == '1' ? 1
                                             : 17;  // odd, so the upper halves visited cover every bit pattern evenly
}

template <typename Out, typename Bulk, typename Reference>
void check_every_float(Bulk bulk, Reference reference, const char* name) {
    std::vector<std::uint32_t> bits(kChunk);
    std::vector<float> in(kChunk);
    std::vector<Out> fast(kChunk);
    const std::uint64_t step = kChunk * chunk_stride();
    for (std::uint64_t start = 0; start < (std::uint64_t{1} << 32); start += step) {
        for (std::size_t i = 0; i < kChunk; ++i) bits[i] = static_cast<std::uint32_t>(start + i);
        std::memcpy(in.data(), bits.data(), kChunk * sizeof(float));
        bulk(in.data(), fast.data(), kChunk);
        for (std::size_t i = 0; i < kChunk; ++i) {
            if (fast[i] != reference(in[i])) {
                FAIL() << name << ": input bits " << std::hex << bits[i] << " gave " << +fast[i] << ", scalar "
                       << +reference(in[i]);
            }
        }
    }
}

TEST(ExhaustiveFloat, Avx2NarrowingEqualsScalarForEveryFloat) {
    if (!avx2_available()) GTEST_SKIP() << "this CPU has no AVX2/F16C (or MSA_FORCE_SCALAR is set)";
    on_avx2_path([] {
        check_every_float<std::uint16_t>([](auto... a) { float_to_bf16(a...); },
                                         [](float x) { return float_to_bf16(x); }, "float_to_bf16");
        check_every_float<std::uint16_t>([](auto... a) { float_to_fp16(a...); },
                                         [](float x) { return float_to_fp16(x, Overflow::ieee); }, "float_to_fp16");
        check_every_float<std::uint8_t>([](auto... a) { float_to_e4m3(a...); },
                                        [](float x) { return float_to_e4m3(x, Overflow::saturate); }, "float_to_e4m3");
        check_every_float<std::uint8_t>([](auto... a) { float_to_e5m2(a...); },
                                        [](float x) { return float_to_e5m2(x, Overflow::saturate); }, "float_to_e5m2");
    });
}

}  // namespace
}  // namespace msa::test
