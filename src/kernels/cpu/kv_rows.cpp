#include "kernels/cpu/kv_rows.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "formats/nvfp4.h"
#include "formats/scalar_formats.h"
#include "kernels/cpu/fp_tables.h"
#include "kernels/cpu/gemm_nt.h"

#include <cstring>

namespace msa::cpu {

void read_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out);
void dot_kv_rows_nvfp4_avx2(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a,
                            std::int64_t arows, float* out, std::int64_t ldo);
void read_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, float* out);
void dot_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, const float* a, std::int64_t arows,
                              float* out, std::int64_t ldo);
void dot_kv_rows_nvfp4_keys_avx512(const PagedRows& rows, std::int32_t page, int count, const float* a,
                                   std::int64_t arows, float* out, std::int64_t ldo);
void pv_kv_rows_nvfp4_avx512(const PagedRows& rows, std::int32_t page, int count, const float* p, int ldp, int nrows,
                             const float* alpha, float* acc);

void write_kv_row(const PagedRows& rows, std::int32_t page, int slot, const float* x) {
    std::uint8_t* data = rows.row_data(page, slot);
    switch (rows.dtype) {
        case KvCacheDtype::NVFP4:
            nvfp4_quantize(x, static_cast<std::size_t>(rows.dim), data, rows.row_scales(page, slot));
            return;
        case KvCacheDtype::FP8:
            for (int i = 0; i < rows.dim; ++i) data[i] = float_to_e4m3(x[i], Overflow::saturate);
            return;
        case KvCacheDtype::BF16:
            for (int i = 0; i < rows.dim; ++i) {
                const std::uint16_t b = float_to_bf16(x[i]);
                std::memcpy(data + 2 * i, &b, 2);
            }
            return;
    }
}

void read_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out) {
    const int dim = rows.dim;
    switch (rows.dtype) {
        case KvCacheDtype::NVFP4:
            if (cpu_features().avx512 && mode == KvRead::exact && dim % 32 == 0) {
                read_kv_rows_nvfp4_avx512(rows, page, count, out);
                return;
            }
            if (cpu_features().avx2 && dim % 16 == 0) {
                read_kv_rows_nvfp4_avx2(rows, page, count, mode, out);
                return;
            }
            for (int t = 0; t < count; ++t) {
                const std::uint8_t* d = rows.row_data(page, t);
                const std::uint8_t* s = rows.row_scales(page, t);
                for (int i = 0; i < dim; ++i) {
                    const std::uint8_t code = (i & 1) ? (d[i / 2] >> 4) : (d[i / 2] & 0x0F);
                    const float v = kE2m1Values[code] * e4m3_value(s[i / 16]);
                    out[t * dim + i] = mode == KvRead::e4m3 ? round_to_e4m3(v) : v;
                }
            }
            return;
        case KvCacheDtype::FP8:
            for (int t = 0; t < count; ++t) {
                const std::uint8_t* d = rows.row_data(page, t);
                for (int i = 0; i < dim; ++i) out[t * dim + i] = e4m3_value(d[i]);
            }
            return;
        case KvCacheDtype::BF16:
            for (int t = 0; t < count; ++t) {
                const std::uint8_t* d = rows.row_data(page, t);
                for (int i = 0; i < dim; ++i) {
                    std::uint16_t b;
                    std::memcpy(&b, d + 2 * i, 2);
                    const float v = bf16_to_float(b);
                    out[t * dim + i] = mode == KvRead::e4m3 ? round_to_e4m3(v) : v;
                }
            }
            return;
    }
}

void dot_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a, std::int64_t arows,
                 float* out, std::int64_t ldo, std::vector<float>& scratch) {
    if (count <= 0 || arows <= 0) return;
    if (rows.dtype == KvCacheDtype::NVFP4 && cpu_features().avx512 && mode == KvRead::exact && rows.dim % 32 == 0 &&
        arows <= kFusedDotMaxRows) {
        // Both the AVX2 kernel's results, bit for bit; rows of 128 values (the models' head and index dimension)
        // take the kernel with 16 stored rows per register.
        if (rows.dim == 128) {
            dot_kv_rows_nvfp4_keys_avx512(rows, page, count, a, arows, out, ldo);
        } else {
            dot_kv_rows_nvfp4_avx512(rows, page, count, a, arows, out, ldo);
        }
        return;
    }
    if (rows.dtype == KvCacheDtype::NVFP4 && cpu_features().avx2 && rows.dim % 16 == 0 && arows <= kFusedDotMaxRows) {
        dot_kv_rows_nvfp4_avx2(rows, page, count, mode, a, arows, out, ldo);
        return;
    }
    scratch.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(rows.dim));
    read_kv_rows(rows, page, count, mode, scratch.data());
    gemm_nt_f32(a, rows.dim, scratch.data(), rows.dim, out, ldo, arows, count, rows.dim);
}

bool pv_kv_rows_fused(const PagedRows& rows, KvRead mode) {
    return rows.dtype == KvCacheDtype::NVFP4 && mode == KvRead::exact && rows.dim % 32 == 0 && cpu_features().avx512;
}

void pv_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* p, int ldp, int nrows,
                const float* alpha, float* acc) {
    MSA_CHECK(pv_kv_rows_fused(rows, mode), "pv_kv_rows: no fused kernel for these rows (check pv_kv_rows_fused)");
    if (count > 0 && nrows > 0) pv_kv_rows_nvfp4_avx512(rows, page, count, p, ldp, nrows, alpha, acc);
}

}  // namespace msa::cpu
