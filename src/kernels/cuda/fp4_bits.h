// E2M1 (NVFP4) nibbles -> FP16 bit patterns by integer operations, shared by the CUDA kernels and by a host test
// (tests/kernels/fp4_bits_test.cpp checks every nibble in every position against the formats library). No CUDA
// header is needed: on the host the byte permute is emulated.
//
// Target: for the eight nibbles n0..n7 of a 32-bit word (n0 in bits 0-3), four f16x2 words P[i] = (n_i, n_{i+4})
// * 2^-14 (low half n_i), exactly. The FP16 of e2m1 * 2^-14 has a zero low byte and the high byte
// (sign << 7) | (magnitude << 1): the nibble's three magnitude bits land on the FP16 exponent's two low bits and the
// mantissa's top bit (code 1, the value 0.5, becomes an FP16 subnormal), and code 0 gives +0.
//
// Two ways, both exact:
// - shifts (the first version): per f16x2, the sign and the magnitude of two nibbles 16 bits apart are shifted into
//   place and masked: 15 integer operations per word.
// - byte table (default): the high bytes of all four even nibbles are made at once in one word (and those of the odd
//   nibbles in another), then one byte permute per f16x2 puts two of them over zero low bytes: 11 operations per
//   word. Measured on the H200 in docs/cuda-notes.md section 16.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MSA_HD __host__ __device__ __forceinline__
#else
#define MSA_HD inline
#endif

#ifndef MSA_FP4_DECODE
#define MSA_FP4_DECODE 2  // 1: shifts, 2: byte table
#endif

namespace msa::cuda::fp4 {

// PTX prmt.b32 (default mode) / __byte_perm: output byte k is byte (sel >> 4k) & 7 of the 8-byte value {b, a}.
MSA_HD std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
#if defined(__CUDA_ARCH__)
    return __byte_perm(a, b, sel);
#else
    const std::uint64_t v = (static_cast<std::uint64_t>(b) << 32) | a;
    std::uint32_t r = 0;
    for (int k = 0; k < 4; ++k) r |= static_cast<std::uint32_t>((v >> (8 * ((sel >> (4 * k)) & 7))) & 0xFFu) << (8 * k);
    return r;
#endif
}

MSA_HD void decode_shifts(std::uint32_t x, std::uint32_t (&P)[4]) {
    P[3] = (x & 0x80008000u) | ((x >> 3) & 0x0E000E00u);
    P[2] = ((x << 4) & 0x80008000u) | ((x << 1) & 0x0E000E00u);
    P[1] = ((x << 8) & 0x80008000u) | ((x << 5) & 0x0E000E00u);
    P[0] = ((x << 12) & 0x80008000u) | ((x << 9) & 0x0E000E00u);
}

MSA_HD void decode_bytes(std::uint32_t x, std::uint32_t (&P)[4]) {
    // Byte j of `even` is the FP16 high byte of the low nibble of byte j of x (n_{2j}); `odd` of the high nibble
    // (n_{2j+1}). Bits shifted in from neighbouring bytes fall outside the masks.
    const std::uint32_t even = ((x << 4) & 0x80808080u) | ((x << 1) & 0x0E0E0E0Eu);
    const std::uint32_t odd = (x & 0x80808080u) | ((x >> 3) & 0x0E0E0E0Eu);
    // Selector digits 4 pick byte 0 of the zero word: (zero, byte j, zero, byte j + 2) = f16x2 of n_{2j}, n_{2j+4}.
    P[0] = byte_perm(even, 0u, 0x2404u);  // n0, n4
    P[1] = byte_perm(odd, 0u, 0x2404u);   // n1, n5
    P[2] = byte_perm(even, 0u, 0x3414u);  // n2, n6
    P[3] = byte_perm(odd, 0u, 0x3414u);   // n3, n7
}

MSA_HD void decode(std::uint32_t x, std::uint32_t (&P)[4]) {
#if MSA_FP4_DECODE == 1
    decode_shifts(x, P);
#else
    decode_bytes(x, P);
#endif
}

}  // namespace msa::cuda::fp4
