// Lookup tables and float-domain roundings the CPU kernels share. The scalar number formats themselves live in
// formats/scalar_formats.h; these are the fast forms the kernels need in their inner loops.
#pragma once

#include <cstdint>

namespace msa::cpu {

// E4M3 code -> float for all 256 codes (0x7F/0xFF give NaN).
const float* e4m3_table();
inline float e4m3_value(std::uint8_t code) { return e4m3_table()[code]; }
// Half of each E4M3 value (0.5f * e4m3_table()[code], exact): the NVFP4 kernels multiply the doubled E2M1 integers
// (kE2m1Doubled) by it.
const float* e4m3_half_table();

// MXFP8 block factors 2^(e - 127 + shift) for every UE8M0 scale code e (inf where that leaves the float range), for
// the two decodings of gemm_mxfp8_avx2.cpp: shift 120 (integer decoding) or 8 (F16C decoding); other shifts throw.
const float* mxfp8_block_factors(int shift);
inline constexpr int kMxfp8IntegerShift = 120;
// The largest UE8M0 code whose integer-decoding factor 2^(e - 7) is finite.
inline constexpr int kMxfp8MaxIntegerScale = 134;

// E2M1 codes times two, as exact small integers: 0,1,2,3,4,6,8,12 and their negatives (codes 8..15). Kernels work on
// these integers and fold the factor 1/2 into the block scale.
alignas(16) inline constexpr std::int8_t kE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// kE2m1Doubled plus 12 (0..24, unsigned), for the integer GEMMs' maddubs / dpbusd, which take one operand unsigned
// (gemm_nvfp4_q8_avx2.cpp).
alignas(16) inline constexpr std::uint8_t kE2m1DoubledPlus12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                                    12, 11, 10, 9,  8,  6,  4,  0};
inline constexpr float kE2m1Values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// The value of the nearest E4M3 number (round to nearest even, saturating to +-448), returned as a float:
// equals e4m3_to_float(float_to_e4m3(x)) for every non-NaN x. NaN stays NaN.
float round_to_e4m3(float x);

}  // namespace msa::cpu
