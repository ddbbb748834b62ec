// Random weights of every linear format for the CPU benchmarks (msa_cpu_bench, msa_gemv_bench).
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>
#include <random>
#include <vector>

namespace msa::bench {

struct OwnedLinear {
    std::vector<std::uint8_t> data, scales;
    std::vector<std::uint64_t> flags;  // MXFP8: WeightView::mxfp8_exponent_zero_blocks, as the CPU backend adopts it
    float global = 1.0f;               // NVFP4 global scale
    WeightView view;
};

// Weights of the given format quantised from Gaussian floats by the formats library, as a checkpoint's are. (Random
// bytes are not realistic: they hold float subnormals, BF16 ones or E4M3 ones, which real weights practically never
// have and which cost a microcode assist per multiply on x86; up to session 4 the benchmark used such bytes.)
// `copy_of` reuses another matrix's bytes (streaming figures only need distinct memory).
OwnedLinear random_linear(LinearFormat f, std::int64_t rows, std::int64_t cols, std::mt19937& rng,
                          const OwnedLinear* copy_of = nullptr);

}  // namespace msa::bench
