// Run-time CPU feature detection. Fast paths compiled with AVX2/FMA/F16C (files named *_avx2.cpp) are only
// called when cpu_features().avx2 is true, and those compiled with AVX-512 (*_avx512.cpp) when avx512 is true.
// Setting MSA_FORCE_SCALAR=1 in the environment disables both, which is how tests check that the scalar and SIMD
// paths agree; MSA_NO_AVX512=1 disables only the AVX-512 ones (their results equal the AVX2 kernels' bit for bit,
// so this changes speed only: benchmarks compare the two in one binary).
#pragma once

namespace msa {

struct CpuFeatures {
    bool avx2 = false;  // AVX2 + FMA + F16C together (we never use one without the others)
    bool bmi2 = false;
    // AVX-512 F, BW, DQ, VL and VNNI with the OS saving the zmm and mask state, on top of avx2.
    bool avx512 = false;
};

const CpuFeatures& cpu_features();

// Overrides detection (tests use it to run both paths in one process). Not thread-safe against concurrent
// kernel calls: call it between tests only.
void set_cpu_features_for_testing(const CpuFeatures& features);

}  // namespace msa
