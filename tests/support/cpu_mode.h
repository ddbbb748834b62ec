// Runs a test body with the SIMD kernels switched off (scalar fallbacks), or with chosen features, and restores
// detection afterwards.
#pragma once

#include "core/cpu_features.h"

namespace msa::test {

class ScopedCpuFeatures {
public:
    // simd == false: force the scalar paths; simd == true: keep what the CPU has.
    explicit ScopedCpuFeatures(bool simd) : saved_(cpu_features()) {
        if (!simd) set_cpu_features_for_testing(CpuFeatures{});
    }
    // These features exactly (e.g. the detected ones without avx512).
    explicit ScopedCpuFeatures(const CpuFeatures& features) : saved_(cpu_features()) {
        set_cpu_features_for_testing(features);
    }
    ~ScopedCpuFeatures() { set_cpu_features_for_testing(saved_); }
    ScopedCpuFeatures(const ScopedCpuFeatures&) = delete;
    ScopedCpuFeatures& operator=(const ScopedCpuFeatures&) = delete;

private:
    CpuFeatures saved_;
};

}  // namespace msa::test
