#include "kernels/cpu/attention_layer.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace msa::cpu {

void attention_layer(const AttentionLayer& layer, std::span<const AttentionSeq> seqs, float* q, float* k,
                     const float* v, float* index_q, float* index_k, float* out, const AttentionOptions& options) {
    const int H = layer.num_heads, Hkv = layer.num_kv_heads, D = layer.head_dim, Di = layer.index_dim;
    std::int64_t T = 0;
    for (const auto& s : seqs) T = std::max<std::int64_t>(T, s.q_offset + s.q_len);
    std::vector<std::int32_t> positions(static_cast<std::size_t>(T), 0);
    for (const auto& s : seqs) {
        MSA_CHECK(s.q_len <= s.kv_len, "attention needs kv_len >= q_len (got {} and {})", s.kv_len, s.q_len);
        for (std::int32_t i = 0; i < s.q_len; ++i) positions[static_cast<std::size_t>(s.q_offset + i)] = query_position(s, i);
    }
    const float eps = layer.norm_eps;
    if (layer.q_norm != nullptr) gemma_rms_norm(q, layer.q_norm, T * H, D, eps, q);
    if (layer.k_norm != nullptr) gemma_rms_norm(k, layer.k_norm, T * Hkv, D, eps, k);
    const RopeTables& rope = rope_tables_reused(positions.data(), T, layer.rotary_dim, layer.rope_theta);
    apply_rope(q, T, H, D, rope);
    apply_rope(k, T, Hkv, D, rope);
    if (layer.msa) {
        MSA_CHECK(index_q != nullptr && index_k != nullptr && layer.kv.has_index() && Di == layer.kv.index_dim,
                  "an MSA layer needs index projections and index-key pages");
        gemma_rms_norm(index_q, layer.index_q_norm, T * Hkv, Di, eps, index_q);
        gemma_rms_norm(index_k, layer.index_k_norm, T, Di, eps, index_k);
        apply_rope(index_q, T, Hkv, Di, rope);
        apply_rope(index_k, T, 1, Di, rope);
    }

    // Insert first, then attend: a token sees its own key and value quantised, as the real kernels do.
    for (const auto& s : seqs) {
        parallel_for(static_cast<std::size_t>(s.q_len), 16, [&](std::size_t b, std::size_t e) {
            for (std::size_t i = b; i < e; ++i) {
                const std::int64_t row = s.q_offset + static_cast<std::int64_t>(i);
                const std::int32_t pos = query_position(s, static_cast<std::int32_t>(i));
                const std::int32_t page = s.pages[pos / kKvPageTokens];
                const int slot = pos % kKvPageTokens;
                for (int h = 0; h < Hkv; ++h) {
                    write_kv_row(layer.kv.k(h), page, slot, k + (row * Hkv + h) * D);
                    write_kv_row(layer.kv.v(h), page, slot, v + (row * Hkv + h) * D);
                }
                if (layer.msa) write_kv_row(layer.kv.index_k(), page, slot, index_k + row * Di);
            }
        });
    }

    const AttentionShape shape{H, Hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
    if (!layer.msa) {
        dense_attention(layer.kv, seqs, q, shape, options.numerics, out);
        return;
    }
    std::vector<std::int32_t> own;
    std::int32_t* selected = options.selected_blocks;
    if (selected == nullptr) {
        own.resize(static_cast<std::size_t>(T * Hkv * layer.topk_blocks));
        selected = own.data();
    }
    MsaIndexOptions index_options;
    index_options.topk = layer.topk_blocks;
    index_options.topk_mode = options.topk_mode;
    index_options.numerics = options.numerics;
    msa_select_blocks(layer.kv.index_k(), seqs, index_q, Hkv, index_options, selected);
    sparse_attention(layer.kv, seqs, q, selected, layer.topk_blocks, shape, options.numerics, out);
}

}  // namespace msa::cpu
