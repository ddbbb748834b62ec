// Run-time CPU feature detection. Fast paths compiled with AVX2/FMA/F16C (files named *_avx2.cpp) are only
// called when cpu_features().avx2 is true. Setting MSA_FORCE_SCALAR=1 in the environment disables them, which is
// how tests check that the scalar and SIMD paths agree.
#pragma once

namespace msa {

struct CpuFeatures {
    bool avx2 = false;  // AVX2 + FMA + F16C together (we never use one without the others)
    bool bmi2 = false;
    bool avx512f = false;
};

const CpuFeatures& cpu_features();

// Overrides detection (tests use it to run both paths in one process). Not thread-safe against concurrent
// kernel calls: call it between tests only.
void set_cpu_features_for_testing(const CpuFeatures& features);

}  // namespace msa
