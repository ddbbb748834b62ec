// Writing K/V/index-K rows into paged storage (quantising on insert, formats.md section 3) and reading a block of
// rows back as floats for the attention and indexer kernels.
#pragma once

#include "kernels/kv_layout.h"

#include <cstdint>
#include <vector>

namespace msa::cpu {

// Stores x[0..dim) as row `slot` (0..127) of physical page `page`: NVFP4 with the KV-insert quantiser, E4M3 with a
// saturating round-to-nearest-even cast, BF16 with round-to-nearest-even.
void write_kv_row(const PagedRows& rows, std::int32_t page, int slot, const float* x);

// How stored values become floats for a kernel.
enum class KvRead {
    exact,  // NVFP4: e2m1 * scale; FP8: the E4M3 value; BF16: the BF16 value
    e4m3,   // the Q8KV4 contract: the exact value rounded once to E4M3 (satfinite RNE); FP8 is unchanged
};

// Rows [0, count) of `page` -> out [count][dim].
void read_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, float* out);

// out[i * ldo + t] = a[i] . row t (read as by read_kv_rows with `mode`) for i < arows, t < count: the same FP32 sums
// as read_kv_rows followed by gemm_nt_f32, bit for bit. Few query rows over NVFP4 (decode) take a fused AVX2 kernel
// that decodes each stored row once, in registers, for all query rows (on AVX-512 its bits from kv_rows_avx512.cpp,
// or for rows of 128 values from kv_dot_keys_avx512.cpp, 16 stored rows per register); otherwise the rows are read
// into `scratch` (resized as needed) and multiplied there.
void dot_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* a, std::int64_t arows,
                 float* out, std::int64_t ldo, std::vector<float>& scratch);

// Query rows up to which dot_kv_rows takes its fused path.
inline constexpr std::int64_t kFusedDotMaxRows = 8;

// Whether pv_kv_rows has a kernel for these rows and read mode (NVFP4, exact, AVX-512, dim a multiple of 32).
bool pv_kv_rows_fused(const PagedRows& rows, KvRead mode);

// The PV step straight from stored value rows 0 .. count - 1 of a page, without a float copy of them: for each of
// nrows query rows i, acc[i][:] = acc[i][:] * alpha[i] + sum over j of p[i * ldp + j] * v_j[:]. The same bits as
// read_kv_rows followed by pv_accumulate_rows (q8kv4 false). Only where pv_kv_rows_fused says so.
void pv_kv_rows(const PagedRows& rows, std::int32_t page, int count, KvRead mode, const float* p, int ldp, int nrows,
                const float* alpha, float* acc);

}  // namespace msa::cpu
