// Dense and sparse attention share one routine (attend): work is split into tasks of (sequence, KV group, tile of
// queries); a task walks the union of its queries' blocks in ascending order, reads each block's K and V once, and
// updates the online-softmax state of every query of the tile that uses that block.
#include "kernels/cpu/attention.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_nt.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/softmax_pv.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace msa::cpu {
namespace {

constexpr int kQueryTile = 32;

struct Task {
    std::size_t seq;
    int group;
    std::int32_t i0, i1;  // query range within the sequence
    int h0, h1;           // query heads [h0, h1) of the group's H / Hkv
};

// Blocks one query attends to, ascending. Dense: 0..local. Sparse: its valid selected entries.
void query_blocks(const std::int32_t* selected, int topk, std::int32_t local, std::vector<std::int32_t>& out) {
    out.clear();
    if (selected == nullptr) {
        for (std::int32_t b = 0; b <= local; ++b) out.push_back(b);
        return;
    }
    for (int s = 0; s < topk; ++s) {
        const std::int32_t b = selected[s];
        if (b >= 0 && b <= local) out.push_back(b);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
}

struct Scratch {
    std::vector<float> k, v;        // [128][D]
    std::vector<float> a;           // gathered queries [tile * r][D]
    std::vector<float> logits;      // [tile * r][128]
    std::vector<float> p;           // [r][128]
    std::vector<float> alpha;       // [r]
    std::vector<float> acc;         // [tile * r][D]
    std::vector<float> m, l;        // [tile * r]
    std::vector<std::vector<std::int32_t>> blocks;  // per query of the tile
    std::vector<int> users;         // queries of the tile using the current block
};

void attend_task(const KvLayerView& kv, const AttentionSeq& seq, const Task& task, const float* q,
                 const std::int32_t* selected, int topk, const AttentionShape& shape, AttentionNumerics numerics,
                 float* out, Scratch& s) {
    const int D = shape.head_dim;
    const int H = shape.num_heads;
    const int group_heads = H / shape.num_kv_heads;
    const int g = task.group;
    const int h0 = task.h0;
    const int r = task.h1 - task.h0;  // heads of this task
    const int nq = task.i1 - task.i0;
    const bool q8 = numerics == AttentionNumerics::q8kv4;
    const KvRead read_mode = q8 ? KvRead::e4m3 : KvRead::exact;
    const PagedRows krows = kv.k(g);
    const PagedRows vrows = kv.v(g);

    s.blocks.resize(static_cast<std::size_t>(nq));
    std::vector<std::int32_t> all;
    for (int t = 0; t < nq; ++t) {
        const std::int32_t i = task.i0 + t;
        const std::int32_t pos = query_position(seq, i);
        auto& blocks = s.blocks[static_cast<std::size_t>(t)];
        if (pos < 0) {
            blocks.clear();
        } else {
            const std::int32_t* sel =
                selected ? selected + ((seq.q_offset + i) * shape.num_kv_heads + g) * topk : nullptr;
            query_blocks(sel, topk, pos / kKvPageTokens, blocks);
        }
        all.insert(all.end(), blocks.begin(), blocks.end());
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());

    const std::size_t rows = static_cast<std::size_t>(nq * r);
    s.acc.assign(rows * D, 0.0f);
    s.m.assign(rows, -std::numeric_limits<float>::infinity());
    s.l.assign(rows, 0.0f);
    s.v.resize(static_cast<std::size_t>(kKvPageTokens * D));
    s.a.resize(rows * D);
    s.logits.resize(rows * kKvPageTokens);
    s.p.resize(static_cast<std::size_t>(r) * kKvPageTokens);
    s.alpha.resize(static_cast<std::size_t>(r));
    std::vector<std::size_t> cursor(static_cast<std::size_t>(nq), 0);

    // Q8KV4 quantises P = exp(s - max) to E4M3, so the max it is taken against matters: a pre-pass over the blocks
    // finds each row's max over all its selected keys first, and every block's P is then relative to that final
    // max (alpha stays 1). This makes the result independent of block order and chunking, and it is the reference's
    // choice (tools/reference/README.md: one row max over all selected keys).
    for (int pass = q8 ? 0 : 1; pass < 2; ++pass) {
    std::fill(cursor.begin(), cursor.end(), 0);
    for (const std::int32_t b : all) {
        s.users.clear();
        for (int t = 0; t < nq; ++t) {
            auto& blocks = s.blocks[static_cast<std::size_t>(t)];
            auto& c = cursor[static_cast<std::size_t>(t)];
            if (c < blocks.size() && blocks[c] == b) {
                s.users.push_back(t);
                ++c;
            }
        }
        const int valid = std::min(kKvPageTokens, seq.kv_len - b * kKvPageTokens);
        const std::int32_t page = seq.pages[b];
        if (pass == 1) read_kv_rows(vrows, page, valid, read_mode, s.v.data());
        // Gather the r heads of every user query, then one product against the block's keys.
        for (std::size_t u = 0; u < s.users.size(); ++u) {
            const std::int64_t row = seq.q_offset + task.i0 + s.users[u];
            std::memcpy(s.a.data() + u * r * D, q + (row * H + g * group_heads + h0) * D, sizeof(float) * r * D);
        }
        const std::int64_t arows = static_cast<std::int64_t>(s.users.size()) * r;
        if (q8) round_rows_to_e4m3(s.a.data(), static_cast<long>(arows * D));
        dot_kv_rows(krows, page, valid, read_mode, s.a.data(), arows, s.logits.data(), kKvPageTokens, s.k);
        for (std::size_t u = 0; u < s.users.size(); ++u) {
            const int t = s.users[u];
            const std::int32_t pos = query_position(seq, task.i0 + t);
            const int visible = std::min(valid, pos - b * kKvPageTokens + 1);
            for (int h = 0; h < r; ++h) {
                const std::size_t st = static_cast<std::size_t>(t * r + h);
                if (pass == 0) {
                    const float* raw = s.logits.data() + (u * r + h) * kKvPageTokens;
                    for (int j = 0; j < visible; ++j) s.m[st] = std::max(s.m[st], raw[j] * shape.softmax_scale);
                    continue;
                }
                s.alpha[static_cast<std::size_t>(h)] =
                    online_softmax_block(s.logits.data() + (u * r + h) * kKvPageTokens, visible, shape.softmax_scale,
                                         s.m[st], s.l[st], s.p.data() + h * kKvPageTokens);
            }
            // The user's r heads share the block's values: one pass over V for all of them.
            if (pass == 1) {
                pv_accumulate_rows(s.acc.data() + static_cast<std::size_t>(t * r) * D, s.alpha.data(), s.p.data(),
                                   kKvPageTokens, s.v.data(), visible, D, q8, r);
            }
        }
    }
    }
    for (int t = 0; t < nq; ++t) {
        const std::int64_t row = seq.q_offset + task.i0 + t;
        for (int h = 0; h < r; ++h) {
            const std::size_t st = static_cast<std::size_t>(t * r + h);
            float* o = out + (row * H + g * group_heads + h0 + h) * D;
            if (s.blocks[static_cast<std::size_t>(t)].empty()) {
                std::fill_n(o, D, 0.0f);
                continue;
            }
            const float inv = 1.0f / s.l[st];
            for (int d = 0; d < D; ++d) o[d] = s.acc[st * D + d] * inv;
        }
    }
}

void attend(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q, const std::int32_t* selected,
            int topk, const AttentionShape& shape, AttentionNumerics numerics, float* out) {
    MSA_CHECK(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
              "attention needs num_heads ({}) divisible by num_kv_heads ({})", shape.num_heads, shape.num_kv_heads);
    MSA_CHECK(shape.head_dim % 8 == 0 && shape.head_dim == kv.head_dim && shape.num_kv_heads == kv.num_kv_heads,
              "attention shape (kv heads {}, head dim {}) does not match the KV cache (kv heads {}, head dim {})",
              shape.num_kv_heads, shape.head_dim, kv.num_kv_heads, kv.head_dim);
    std::vector<Task> tasks;
    for (std::size_t si = 0; si < seqs.size(); ++si) {
        const AttentionSeq& seq = seqs[si];
        MSA_CHECK(seq.q_len >= 0 && seq.kv_len >= 0 && (seq.kv_len == 0 || seq.pages != nullptr),
                  "attention sequence {} has q_len {}, kv_len {} and {} page table", si, seq.q_len, seq.kv_len,
                  seq.pages ? "a" : "no");
        for (int g = 0; g < shape.num_kv_heads; ++g)
            for (std::int32_t i0 = 0; i0 < seq.q_len; i0 += kQueryTile)
                tasks.push_back(Task{si, g, i0, std::min(seq.q_len, i0 + kQueryTile), 0, shape.num_heads / shape.num_kv_heads});
    }
    // Decode has one task per KV group, fewer than the threads: split the group's query heads over tasks as well.
    // Every head's softmax and sums are its own, so results do not change (each task re-reads the group's blocks).
    const int group_heads = shape.num_heads / shape.num_kv_heads;
    const int head_split =
        std::min<int>(group_heads, static_cast<int>(num_threads() / std::max<std::size_t>(tasks.size(), 1)));
    if (head_split > 1) {
        std::vector<Task> split;
        for (const Task& t : tasks)
            for (int p = 0; p < head_split; ++p)
                split.push_back(Task{t.seq, t.group, t.i0, t.i1, group_heads * p / head_split,
                                     group_heads * (p + 1) / head_split});
        tasks.swap(split);
    }
    parallel_for(tasks.size(), 1, [&](std::size_t begin, std::size_t end) {
        Scratch scratch;
        for (std::size_t t = begin; t < end; ++t) {
            attend_task(kv, seqs[tasks[t].seq], tasks[t], q, selected, topk, shape, numerics, out, scratch);
        }
    });
}

}  // namespace

void dense_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                     const AttentionShape& shape, AttentionNumerics numerics, float* out) {
    attend(kv, seqs, q, nullptr, 0, shape, numerics, out);
}

void sparse_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                      const std::int32_t* selected, int topk, const AttentionShape& shape,
                      AttentionNumerics numerics, float* out) {
    MSA_CHECK(selected != nullptr && topk > 0, "sparse attention needs a block selection");
    attend(kv, seqs, q, selected, topk, shape, numerics, out);
}

}  // namespace msa::cpu
