// Running a test body on the scalar path and on the AVX2 path of the bulk functions in one process.
#pragma once

#include <gtest/gtest.h>

#include "core/cpu_features.h"

namespace msa::test {

// The features detected at start-up (before any test overrides them); MSA_FORCE_SCALAR=1 clears avx2 here.
inline const CpuFeatures& detected_cpu_features() {
    static const CpuFeatures detected = cpu_features();
    return detected;
}

// Sets the CPU features for the lifetime of the object and restores the previous ones.
class ScopedCpuFeatures {
public:
    explicit ScopedCpuFeatures(const CpuFeatures& features) : saved_(cpu_features()) {
        set_cpu_features_for_testing(features);
    }
    ~ScopedCpuFeatures() { set_cpu_features_for_testing(saved_); }
    ScopedCpuFeatures(const ScopedCpuFeatures&) = delete;
    ScopedCpuFeatures& operator=(const ScopedCpuFeatures&) = delete;

private:
    CpuFeatures saved_;
};

inline bool avx2_available() {
    return detected_cpu_features().avx2;
}

template <typename Fn>
auto on_scalar_path(Fn&& fn) {
    (void)detected_cpu_features();
    ScopedCpuFeatures scope(CpuFeatures{});
    return fn();
}

// Only call when avx2_available().
template <typename Fn>
auto on_avx2_path(Fn&& fn) {
    ScopedCpuFeatures scope(detected_cpu_features());
    return fn();
}

// Runs fn on the scalar path, then on the AVX2 path when the CPU has it; failures say which path.
template <typename Fn>
void on_every_path(Fn&& fn) {
    {
        SCOPED_TRACE("scalar path");
        on_scalar_path(fn);
    }
    if (avx2_available()) {
        SCOPED_TRACE("AVX2 path");
        on_avx2_path(fn);
    }
}

}  // namespace msa::test
