// Partial NeoX rotary embedding (model.md section 7): inv_freq_i = theta^(-2i / rotary_dim) for i < rotary_dim/2;
// dims i and i + rotary_dim/2 rotate together by angle pos * inv_freq_i; dims >= rotary_dim pass through.
// cos and sin are computed in float64 and rounded to FP32 (FP32 angles lose accuracy near 1M positions).
#pragma once

#include <cstdint>
#include <vector>

namespace msa::cpu {

// cos/sin tables for a list of positions: [positions][rotary_dim / 2] each.
struct RopeTables {
    int half = 0;
    std::vector<float> cos;
    std::vector<float> sin;
};
RopeTables rope_tables(const std::int32_t* positions, std::int64_t count, int rotary_dim, double theta);

// rope_tables() for these arguments, kept per thread and computed again only when they differ from the previous
// call's (every layer of a forward pass asks for the same positions: decode computed the same float64 cos/sin once
// per layer). The tables are rope_tables()'s; the reference stays valid until this thread's next call.
const RopeTables& rope_tables_reused(const std::int32_t* positions, std::int64_t count, int rotary_dim, double theta);

// Rotates x: [count][heads][head_dim] in place; token t uses row t of the tables.
void apply_rope(float* x, std::int64_t count, int heads, int head_dim, const RopeTables& tables);

}  // namespace msa::cpu
