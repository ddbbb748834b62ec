#include "core/cpu_features.h"

#include "core/env_flag.h"

#include <cpuid.h>

namespace msa {
namespace {

CpuFeatures detect() {
    CpuFeatures f;
    if (env_flag("MSA_FORCE_SCALAR")) return f;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) {
        return f;
    }
    const bool fma = (ecx & bit_FMA) != 0;
    const bool f16c = (ecx & bit_F16C) != 0;
    const bool osxsave = (ecx & bit_OSXSAVE) != 0;
    bool ymm_enabled = false, zmm_enabled = false;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        ymm_enabled = (lo & 0x6) == 0x6;
        zmm_enabled = (lo & 0xE6) == 0xE6;  // also the opmask and both halves of the zmm registers
    }
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) {
        f.avx2 = ymm_enabled && fma && f16c && (ebx & bit_AVX2) != 0;
        f.bmi2 = (ebx & bit_BMI2) != 0;
        const unsigned avx512_ebx = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
        f.avx512 = f.avx2 && zmm_enabled && (ebx & avx512_ebx) == avx512_ebx && (ecx & bit_AVX512VNNI) != 0 &&
                   !env_flag("MSA_NO_AVX512");
    }
    return f;
}

CpuFeatures& state() {
    static CpuFeatures features = detect();
    return features;
}

}  // namespace

const CpuFeatures& cpu_features() { return state(); }

void set_cpu_features_for_testing(const CpuFeatures& features) { state() = features; }

}  // namespace msa
