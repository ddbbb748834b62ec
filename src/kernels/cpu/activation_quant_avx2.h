// AVX2 pieces of the activation quantisers (activation_quant.cpp; call only when cpu_features().avx2).
#pragma once

#include <cstdint>

namespace msa::cpu::avx2 {

// max |x[j]| over j < k, NaNs ignored (as std::max(amax, fabs(x)) from 0 does).
float row_amax(const float* x, std::int64_t k);

// NVFP4 codes of `chunks` whole 64-value chunks (32 bytes each, element 2b in the low nibble of byte b) -> doubled
// E2M1 int8 values in the stored order of activation_quant.h (per chunk the low-nibble plane, then the high one).
void unpack_doubled_e2m1(const std::uint8_t* packed, std::int64_t chunks, std::int8_t* out);

}  // namespace msa::cpu::avx2
