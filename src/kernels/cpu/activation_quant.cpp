#include "kernels/cpu/activation_quant.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "formats/nvfp4.h"
#include "kernels/cpu/activation_quant_avx2.h"
#include "kernels/cpu/fp_tables.h"

#include <algorithm>
#include <cmath>

namespace msa::cpu {
namespace {

void resize(Q8Rows& out, std::int64_t m, std::int64_t k) {
    MSA_CHECK(k % 16 == 0, "quantised activations need a row length divisible by 16, got {}", k);
    out.m = m;
    out.k = k;
    out.q.resize(static_cast<std::size_t>(m * k));
    out.d.resize(static_cast<std::size_t>(m * k / 16));
    out.row_mul.assign(static_cast<std::size_t>(m), 1.0f);
}

}  // namespace

void quantize_rows_q8(const float* x, std::int64_t m, std::int64_t k, Q8Rows& out) {
    resize(out, m, k);
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t g = 0; g < k / 16; ++g) {
            const float* src = x + i * k + g * 16;
            float amax = 0.0f;
            for (int e = 0; e < 16; ++e) amax = std::max(amax, std::fabs(src[e]));
            const float d = amax / 127.0f;
            const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            std::int8_t* dst = out.q.data() + i * k;
            const Q8GroupSlots slot = q8_group_slots(g, k);
            for (int e = 0; e < 16; ++e) {
                dst[(e & 1) ? slot.hi + e / 2 : slot.lo + e / 2] =
                    static_cast<std::int8_t>(std::clamp(std::nearbyint(src[e] * inv), -127.0f, 127.0f));
            }
            out.d[static_cast<std::size_t>(i * (k / 16) + g)] = d;
        }
    }
}

void quantize_rows_w4a4(const float* x, std::int64_t m, std::int64_t k, W4a4Input input, Q8Rows& out) {
    resize(out, m, k);
    const bool simd = cpu_features().avx2;
    thread_local std::vector<std::uint8_t> packed, scales;
    packed.resize(static_cast<std::size_t>(k / 2));
    scales.resize(static_cast<std::size_t>(k / 16));
    const float* e4m3 = e4m3_table();
    for (std::int64_t i = 0; i < m; ++i) {
        const float* row = x + i * k;
        float row_scale = 16.0f;
        float row_mul = 1.0f / 16.0f;
        if (input == W4a4Input::fc1) {
            float amax = 0.0f;
            if (simd) {
                amax = avx2::row_amax(row, k);
            } else {
                for (std::int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(row[j]));
            }
            if (!(amax > 0.0f)) {  // an all-zero row (or NaN): quantises to zeros
                std::fill_n(out.q.data() + i * k, k, std::int8_t{0});
                std::fill_n(out.d.data() + i * (k / 16), k / 16, 0.0f);
                continue;
            }
            row_scale = 2688.0f / amax;
            row_mul = amax / 2688.0f;
        }
        nvfp4_quantize_activation_row(row, static_cast<std::size_t>(k), row_scale, packed.data(), scales.data());
        out.row_mul[static_cast<std::size_t>(i)] = row_mul;
        std::int8_t* dst = out.q.data() + i * k;
        // Whole 64-value chunks in SIMD, the rest (and everything without AVX2) group by group.
        const std::int64_t g_simd = simd ? k / 64 * 4 : 0;
        if (g_simd > 0) avx2::unpack_doubled_e2m1(packed.data(), g_simd / 4, dst);
        for (std::int64_t g = g_simd; g < k / 16; ++g) {
            const Q8GroupSlots slot = q8_group_slots(g, k);
            for (int b = 0; b < 8; ++b) {  // byte b holds elements 2b (low nibble) and 2b + 1 (high nibble)
                const std::uint8_t byte = packed[static_cast<std::size_t>(g * 8 + b)];
                dst[slot.lo + b] = kE2m1Doubled[byte & 0x0F];
                dst[slot.hi + b] = kE2m1Doubled[byte >> 4];
            }
        }
        float* d = out.d.data() + i * (k / 16);
        for (std::int64_t g = 0; g < k / 16; ++g) d[g] = 0.5f * e4m3[scales[static_cast<std::size_t>(g)]];
    }
}

float q8_value(const Q8Rows& rows, std::int64_t i, std::int64_t j) {
    return static_cast<float>(rows.q[static_cast<std::size_t>(i * rows.k + q8_index(j, rows.k))]) *
           rows.d[static_cast<std::size_t>(i * (rows.k / 16) + j / 16)];
}

}  // namespace msa::cpu
