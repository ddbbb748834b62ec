// The CUDA kernels' integer E2M1 -> FP16 decodes (src/kernels/cuda/fp4_bits.h), checked on the host against the
// formats library: every nibble code in every position of the word, with random neighbours, for both ways.
#include "formats/scalar_formats.h"
#include "kernels/cuda/fp4_bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

namespace msa {
namespace {

using Decode = void (*)(std::uint32_t, std::uint32_t (&)[4]);

// Half j (0 low, 1 high) of P[i] holds nibble i + 4j.
std::uint16_t half_of(const std::uint32_t (&P)[4], int nibble) {
    return static_cast<std::uint16_t>(P[nibble % 4] >> (16 * (nibble / 4)));
}

void check_every_code_in_every_position(Decode decode) {
    std::mt19937 rng(20261130);
    for (int rep = 0; rep < 64; ++rep) {
        const std::uint32_t noise = rng();
        for (int pos = 0; pos < 8; ++pos)
            for (std::uint32_t code = 0; code < 16; ++code) {
                const std::uint32_t x = (noise & ~(0xFu << (4 * pos))) | (code << (4 * pos));
                std::uint32_t P[4];
                decode(x, P);
                for (int n = 0; n < 8; ++n) {
                    const auto c = static_cast<std::uint8_t>((x >> (4 * n)) & 0xF);
                    const float want = std::ldexp(e2m1_to_float(c), -14);
                    const std::uint16_t bits = half_of(P, n);
                    ASSERT_EQ(fp16_to_float(bits), want) << "word " << std::hex << x << " nibble " << n;
                    ASSERT_EQ(bits >> 15, static_cast<unsigned>(c >> 3)) << "sign of nibble " << n;  // -0 stays -0
                }
            }
    }
}

TEST(Fp4Bits, ShiftDecodeIsExact) { check_every_code_in_every_position(cuda::fp4::decode_shifts); }
TEST(Fp4Bits, ByteTableDecodeIsExact) { check_every_code_in_every_position(cuda::fp4::decode_bytes); }

TEST(Fp4Bits, BothDecodesAgreeOnRandomWords) {
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        const std::uint32_t x = rng();
        std::uint32_t a[4], b[4];
        cuda::fp4::decode_shifts(x, a);
        cuda::fp4::decode_bytes(x, b);
        for (int k = 0; k < 4; ++k) ASSERT_EQ(a[k], b[k]) << std::hex << x;
    }
}

TEST(Fp4Bits, HostBytePermuteFollowsThePtxDefinition) {
    // prmt.b32: selector digit d picks byte d of {b:a} (a = bytes 0-3).
    EXPECT_EQ(cuda::fp4::byte_perm(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
    EXPECT_EQ(cuda::fp4::byte_perm(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
    EXPECT_EQ(cuda::fp4::byte_perm(0x33221100u, 0x77665544u, 0x2404u), 0x22440044u);
}

}  // namespace
}  // namespace msa
