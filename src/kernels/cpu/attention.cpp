// Dense and sparse attention share one routine (attend). Work is split into tasks of (sequence, KV group, tile of
// queries); a task walks the union of its queries' blocks in ascending order, reads each block's K and V once, and
// serves every query of the tile that uses the block.
//
// Every query row's result is a fixed function of its own blocks: a first pass takes the row's max m over all its
// visible logits; then each block b gives p = exp(s - m), its sum l_b and its PV partial o_b, computed from zero;
// the partials are added in ascending block order (l = l * alpha + l_b, acc = acc * alpha + o_b, alpha = exp(m - m)
// = 1). So the blocks of one row may be computed by different threads (decode: few rows, many blocks) and added
// afterwards with the same result, bit for bit, as one thread walking them in order (prefill).
#include "kernels/cpu/attention.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/softmax_pv.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace msa::cpu {
namespace {

constexpr int kQueryTile = 32;

// Grows a buffer that is kept between calls to at least n values (never shrinks it, so values are not re-zeroed
// every call); callers write what they read.
template <class T>
T* at_least(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

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

// Which queries of a task use which block. Block i of `all` (ascending) is used by queries users[user_off[i] ..
// user_off[i + 1]); its rows (user u, head h) are slots (user_off[i] + u) * r + h of the per-slot buffers.
struct TaskBlocks {
    std::vector<std::vector<std::int32_t>> blocks;  // per query of the tile
    std::vector<std::int32_t> all;
    std::vector<int> users;
    std::vector<std::size_t> user_off;

    std::size_t slots(int r) const { return users.size() * static_cast<std::size_t>(r); }
};

void plan_task(const AttentionSeq& seq, const Task& task, const std::int32_t* selected, int topk, int num_kv_heads,
               TaskBlocks& tb) {
    const int nq = task.i1 - task.i0;
    tb.blocks.resize(static_cast<std::size_t>(nq));
    tb.all.clear();
    for (int t = 0; t < nq; ++t) {
        const std::int32_t i = task.i0 + t;
        const std::int32_t pos = query_position(seq, i);
        auto& blocks = tb.blocks[static_cast<std::size_t>(t)];
        if (pos < 0) {
            blocks.clear();
        } else {
            const std::int32_t* sel =
                selected ? selected + ((seq.q_offset + i) * num_kv_heads + task.group) * topk : nullptr;
            query_blocks(sel, topk, pos / kKvPageTokens, blocks);
        }
        tb.all.insert(tb.all.end(), blocks.begin(), blocks.end());
    }
    std::sort(tb.all.begin(), tb.all.end());
    tb.all.erase(std::unique(tb.all.begin(), tb.all.end()), tb.all.end());
    tb.users.clear();
    tb.user_off.assign(1, 0);
    std::vector<std::size_t> cursor(static_cast<std::size_t>(nq), 0);
    for (const std::int32_t b : tb.all) {
        for (int t = 0; t < nq; ++t) {
            const auto& blocks = tb.blocks[static_cast<std::size_t>(t)];
            auto& c = cursor[static_cast<std::size_t>(t)];
            if (c < blocks.size() && blocks[c] == b) {
                tb.users.push_back(t);
                ++c;
            }
        }
        tb.user_off.push_back(tb.users.size());
    }
}

// Everything a task needs besides its blocks.
struct TaskContext {
    const KvLayerView* kv;
    const AttentionSeq* seq;
    const Task* task;
    const float* q;
    const AttentionShape* shape;
    bool q8;

    int r() const { return task->h1 - task->h0; }
    KvRead read_mode() const { return q8 ? KvRead::e4m3 : KvRead::exact; }
    int valid(std::int32_t b) const { return std::min(kKvPageTokens, seq->kv_len - b * kKvPageTokens); }
    int visible(int t, std::int32_t b) const {
        return std::min(valid(b), query_position(*seq, task->i0 + t) - b * kKvPageTokens + 1);
    }
};

struct Scratch {
    std::vector<float> k, v;    // [128][D]
    std::vector<float> a;       // gathered queries [users * r][D]
    std::vector<float> logits;  // [users * r][128] (or a whole task's, when kept between the passes)
    std::vector<float> p;       // [r][128]
    std::vector<float> alpha;   // [r]
    std::vector<float> o;       // [r][D]: one user's PV partials of one block
};

// Logits of block i of the task for its user rows: out[slot - first slot of the block][128].
void block_logits(const TaskContext& c, const TaskBlocks& tb, std::size_t i, float* out, Scratch& s) {
    const int D = c.shape->head_dim;
    const int H = c.shape->num_heads;
    const int r = c.r();
    const int group_heads = H / c.shape->num_kv_heads;
    const std::size_t u0 = tb.user_off[i], u1 = tb.user_off[i + 1];
    const std::int32_t b = tb.all[i];
    at_least(s.a, (u1 - u0) * r * D);
    for (std::size_t u = u0; u < u1; ++u) {
        const std::int64_t row = c.seq->q_offset + c.task->i0 + tb.users[u];
        std::memcpy(s.a.data() + (u - u0) * r * D, c.q + (row * H + c.task->group * group_heads + c.task->h0) * D,
                    sizeof(float) * r * D);
    }
    const auto arows = static_cast<std::int64_t>((u1 - u0) * r);
    if (c.q8) round_rows_to_e4m3(s.a.data(), static_cast<long>(arows * D));
    dot_kv_rows(c.kv->k(c.task->group), c.seq->pages[b], c.valid(b), c.read_mode(), s.a.data(), arows, out,
                kKvPageTokens, s.k);
}

// Running max over block i's visible logits of each user row (row_max indexed by query * r + head).
void block_max(const TaskContext& c, const TaskBlocks& tb, std::size_t i, const float* logits, float* row_max) {
    const int r = c.r();
    for (std::size_t u = tb.user_off[i]; u < tb.user_off[i + 1]; ++u) {
        const int t = tb.users[u];
        const int visible = c.visible(t, tb.all[i]);
        for (int h = 0; h < r; ++h) {
            const float* raw = logits + ((u - tb.user_off[i]) * r + h) * kKvPageTokens;
            float& m = row_max[t * r + h];
            m = scaled_max(raw, visible, c.shape->softmax_scale, m);
        }
    }
}

// Whether block i's values are read into Scratch::v first (shared by its users) or, for a block of one user (decode),
// decoded inside the PV product (pv_kv_rows) where a fused kernel exists. The results are the same bits either way.
bool reads_values(const TaskContext& c, const TaskBlocks& tb, std::size_t i) {
    return tb.user_off[i + 1] - tb.user_off[i] > 1 || !pv_kv_rows_fused(c.kv->v(c.task->group), c.read_mode());
}

// Block b's softmax terms and PV partials for one user (query t, r heads) against the rows' final maxima:
// alpha[h] = exp(m - m), l_b[h] = sum of p, o[h][D] = the PV partial added to a zero accumulator. The values come
// from Scratch::v when `values_read`, else straight from the page.
void block_partial(const TaskContext& c, std::int32_t b, bool values_read, const float* logits, int t, int visible,
                   const float* row_max, Scratch& s, float* alpha, float* l_b, float* o) {
    const int D = c.shape->head_dim;
    const int r = c.r();
    for (int h = 0; h < r; ++h) {
        float m = row_max[t * r + h];
        float l = 0.0f;
        alpha[h] = online_softmax_block(logits + h * kKvPageTokens, visible, c.shape->softmax_scale, m, l,
                                        s.p.data() + h * kKvPageTokens);
        l_b[h] = l;
    }
    std::fill_n(o, static_cast<std::size_t>(r) * D, 0.0f);
    if (values_read) {
        pv_accumulate_rows(o, alpha, s.p.data(), kKvPageTokens, s.v.data(), visible, D, c.q8, r);
    } else {
        pv_kv_rows(c.kv->v(c.task->group), c.seq->pages[b], visible, c.read_mode(), s.p.data(), kKvPageTokens, r, alpha,
                   o);
    }
}

// Adds one block's partial to a row's sums: l = l * alpha + l_b, acc = acc * alpha + o (a multiply, then an add, as
// pv_accumulate finishes). Both paths add through this one function, so their bits agree.
void add_block(float& l, float* acc, float alpha, float l_b, const float* o, int D) {
    l = l * alpha + l_b;
    for (int d = 0; d < D; ++d) acc[d] = acc[d] * alpha + o[d];
}

void write_output(const TaskContext& c, const TaskBlocks& tb, const float* acc, const float* l, float* out) {
    const int D = c.shape->head_dim;
    const int H = c.shape->num_heads;
    const int r = c.r();
    const int group_heads = H / c.shape->num_kv_heads;
    const int nq = c.task->i1 - c.task->i0;
    for (int t = 0; t < nq; ++t) {
        const std::int64_t row = c.seq->q_offset + c.task->i0 + t;
        for (int h = 0; h < r; ++h) {
            const std::size_t st = static_cast<std::size_t>(t * r + h);
            float* o = out + (row * H + c.task->group * group_heads + c.task->h0 + h) * D;
            if (tb.blocks[static_cast<std::size_t>(t)].empty()) {
                std::fill_n(o, D, 0.0f);
                continue;
            }
            const float inv = 1.0f / l[st];
            for (int d = 0; d < D; ++d) o[d] = acc[st * D + d] * inv;
        }
    }
}

// A task in one thread: the max pass over its blocks (logits kept for the second pass when they fit in
// kKeepLogitsFloats), then per block the partials, added at once.
constexpr std::size_t kKeepLogitsFloats = std::size_t{1} << 20;

void attend_task(const TaskContext& c, const TaskBlocks& tb, float* out, Scratch& s) {
    const int D = c.shape->head_dim;
    const int r = c.r();
    const int nq = c.task->i1 - c.task->i0;
    const std::size_t rows = static_cast<std::size_t>(nq * r);
    std::vector<float> row_max(rows, -std::numeric_limits<float>::infinity()), l(rows, 0.0f), acc(rows * D, 0.0f);
    const bool keep = tb.slots(r) * kKvPageTokens <= kKeepLogitsFloats;
    at_least(s.logits, (keep ? tb.slots(r) : rows) * kKvPageTokens);  // all blocks' logits, or one block's
    auto logits_of = [&](std::size_t i) { return s.logits.data() + (keep ? tb.user_off[i] * r * kKvPageTokens : 0); };
    for (std::size_t i = 0; i < tb.all.size(); ++i) {
        block_logits(c, tb, i, logits_of(i), s);
        block_max(c, tb, i, logits_of(i), row_max.data());
    }
    at_least(s.v, static_cast<std::size_t>(kKvPageTokens * D));
    at_least(s.p, static_cast<std::size_t>(r) * kKvPageTokens);
    at_least(s.alpha, static_cast<std::size_t>(r));
    at_least(s.o, static_cast<std::size_t>(r) * D);
    std::vector<float> l_b(static_cast<std::size_t>(r));
    for (std::size_t i = 0; i < tb.all.size(); ++i) {
        const std::int32_t b = tb.all[i];
        if (!keep) block_logits(c, tb, i, logits_of(i), s);
        const bool values_read = reads_values(c, tb, i);
        if (values_read) read_kv_rows(c.kv->v(c.task->group), c.seq->pages[b], c.valid(b), c.read_mode(), s.v.data());
        for (std::size_t u = tb.user_off[i]; u < tb.user_off[i + 1]; ++u) {
            const int t = tb.users[u];
            block_partial(c, b, values_read, logits_of(i) + (u - tb.user_off[i]) * r * kKvPageTokens, t,
                          c.visible(t, b), row_max.data(), s, s.alpha.data(), l_b.data(), s.o.data());
            for (int h = 0; h < r; ++h) {
                const std::size_t st = static_cast<std::size_t>(t * r + h);
                add_block(l[st], acc.data() + st * D, s.alpha[h], l_b[h], s.o.data() + h * D, D);
            }
        }
    }
    write_output(c, tb, acc.data(), l.data(), out);
}

// Few tasks (decode): each task's blocks are cut into parts that threads take separately. Pass 1 keeps every
// block's logits and each part's row maxima; pass 2 computes every block's partials from the combined maxima, and
// the part that finishes a task last adds them per row in block order. Same results as attend_task.
struct SplitTask {
    TaskContext c;
    TaskBlocks tb;
    int parts = 1;
    std::atomic<int> parts_left{0};
    // Kept from call to call (decode runs this once per layer per token): they only grow, and every value read is
    // written in the same call first, except part_max, which is reset.
    std::vector<float> logits;      // [slots][128]
    std::vector<float> part_max;    // [parts][nq * r]
    std::vector<float> alpha, l_b;  // [slots]
    std::vector<float> o;           // [slots][D]
    std::vector<float> l, acc;      // [nq * r], [nq * r][D]: the sums, by the last part

    std::size_t part_begin(int p) const { return tb.all.size() * static_cast<std::size_t>(p) / parts; }
};

// Per-thread scratch, kept between calls (pool workers live as long as the process).
Scratch& thread_scratch() {
    thread_local Scratch s;
    return s;
}

// Adds task x's block partials in block order and writes its rows.
void finish_split_task(SplitTask& x, float* out) {
    const int D = x.c.shape->head_dim;
    const int r = x.c.r();
    const std::size_t rows = static_cast<std::size_t>((x.c.task->i1 - x.c.task->i0) * r);
    float* l = at_least(x.l, rows);
    float* acc = at_least(x.acc, rows * D);
    std::fill_n(l, rows, 0.0f);
    std::fill_n(acc, rows * D, 0.0f);
    for (std::size_t i = 0; i < x.tb.all.size(); ++i) {
        for (std::size_t u = x.tb.user_off[i]; u < x.tb.user_off[i + 1]; ++u) {
            const int t = x.tb.users[u];
            for (int h = 0; h < r; ++h) {
                const std::size_t slot = u * r + h, row = static_cast<std::size_t>(t * r + h);
                add_block(l[row], acc + row * D, x.alpha[slot], x.l_b[slot], x.o.data() + slot * D, D);
            }
        }
    }
    write_output(x.c, x.tb, acc, l, out);
}

void attend_split(std::span<const std::unique_ptr<SplitTask>> st, float* out) {
    std::vector<std::pair<std::size_t, int>> units;  // (task, part)
    for (std::size_t t = 0; t < st.size(); ++t)
        for (int p = 0; p < st[t]->parts; ++p) units.emplace_back(t, p);
    parallel_for(units.size(), 1, [&](std::size_t begin, std::size_t end) {
        Scratch& s = thread_scratch();
        for (std::size_t k = begin; k < end; ++k) {
            SplitTask& x = *st[units[k].first];
            const int p = units[k].second;
            const int r = x.c.r();
            float* row_max = x.part_max.data() + static_cast<std::size_t>(p) * (x.c.task->i1 - x.c.task->i0) * r;
            for (std::size_t i = x.part_begin(p); i < x.part_begin(p + 1); ++i) {
                float* logits = x.logits.data() + x.tb.user_off[i] * r * kKvPageTokens;
                block_logits(x.c, x.tb, i, logits, s);
                block_max(x.c, x.tb, i, logits, row_max);
            }
        }
    });
    parallel_for(units.size(), 1, [&](std::size_t begin, std::size_t end) {
        Scratch& s = thread_scratch();
        thread_local std::vector<float> row_max;
        for (std::size_t k = begin; k < end; ++k) {
            SplitTask& x = *st[units[k].first];
            const int p = units[k].second;
            const int D = x.c.shape->head_dim;
            const int r = x.c.r();
            const std::size_t rows = static_cast<std::size_t>((x.c.task->i1 - x.c.task->i0) * r);
            row_max.assign(rows, -std::numeric_limits<float>::infinity());
            for (int q = 0; q < x.parts; ++q)
                for (std::size_t j = 0; j < rows; ++j) row_max[j] = std::max(row_max[j], x.part_max[q * rows + j]);
            at_least(s.v, static_cast<std::size_t>(kKvPageTokens * D));
            at_least(s.p, static_cast<std::size_t>(r) * kKvPageTokens);
            for (std::size_t i = x.part_begin(p); i < x.part_begin(p + 1); ++i) {
                const std::int32_t b = x.tb.all[i];
                const bool values_read = reads_values(x.c, x.tb, i);
                if (values_read)
                    read_kv_rows(x.c.kv->v(x.c.task->group), x.c.seq->pages[b], x.c.valid(b), x.c.read_mode(),
                                 s.v.data());
                for (std::size_t u = x.tb.user_off[i]; u < x.tb.user_off[i + 1]; ++u) {
                    const int t = x.tb.users[u];
                    const std::size_t slot = u * r;
                    block_partial(x.c, b, values_read, x.logits.data() + slot * kKvPageTokens, t, x.c.visible(t, b),
                                  row_max.data(), s, x.alpha.data() + slot, x.l_b.data() + slot, x.o.data() + slot * D);
                }
            }
            // The last part of the task to finish sees every part's partials (acquire-release on the count).
            if (x.parts_left.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_split_task(x, out);
        }
    });
}

// Largest split-pass buffers (floats) before decode falls back to whole tasks.
constexpr std::size_t kSplitMaxFloats = std::size_t{16} << 20;

void attend(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q, const std::int32_t* selected,
            int topk, const AttentionShape& shape, AttentionNumerics numerics, float* out) {
    MSA_CHECK(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
              "attention needs num_heads ({}) divisible by num_kv_heads ({})", shape.num_heads, shape.num_kv_heads);
    MSA_CHECK(shape.head_dim % 8 == 0 && shape.head_dim == kv.head_dim && shape.num_kv_heads == kv.num_kv_heads,
              "attention shape (kv heads {}, head dim {}) does not match the KV cache (kv heads {}, head dim {})",
              shape.num_kv_heads, shape.head_dim, kv.num_kv_heads, kv.head_dim);
    const bool q8 = numerics == AttentionNumerics::q8kv4;
    const int group_heads = shape.num_heads / shape.num_kv_heads;
    std::vector<Task> tasks;
    for (std::size_t si = 0; si < seqs.size(); ++si) {
        const AttentionSeq& seq = seqs[si];
        MSA_CHECK(seq.q_len >= 0 && seq.kv_len >= 0 && (seq.kv_len == 0 || seq.pages != nullptr),
                  "attention sequence {} has q_len {}, kv_len {} and {} page table", si, seq.q_len, seq.kv_len,
                  seq.pages ? "a" : "no");
        for (int g = 0; g < shape.num_kv_heads; ++g)
            for (std::int32_t i0 = 0; i0 < seq.q_len; i0 += kQueryTile)
                tasks.push_back(Task{si, g, i0, std::min(seq.q_len, i0 + kQueryTile), 0, group_heads});
    }
    const auto threads = static_cast<std::size_t>(num_threads());
    // Fewer tasks than threads (decode): cut each task's blocks into parts, about two per thread in all.
    if (threads > 1 && tasks.size() < threads) {
        // The split tasks and their buffers are kept between calls (this runs once per layer and decode token).
        thread_local std::vector<std::unique_ptr<SplitTask>> kept;
        while (kept.size() < tasks.size()) kept.push_back(std::make_unique<SplitTask>());
        const std::span<const std::unique_ptr<SplitTask>> st(kept.data(), tasks.size());
        std::size_t floats = 0;
        const int parts = static_cast<int>((2 * threads + tasks.size() - 1) / tasks.size());
        for (std::size_t t = 0; t < tasks.size(); ++t) {
            SplitTask& x = *st[t];
            x.c = TaskContext{&kv, &seqs[tasks[t].seq], &tasks[t], q, &shape, q8};
            plan_task(seqs[tasks[t].seq], tasks[t], selected, topk, shape.num_kv_heads, x.tb);
            x.parts = std::max(1, std::min<int>(parts, static_cast<int>(x.tb.all.size())));
            floats += x.tb.slots(group_heads) * (kKvPageTokens + shape.head_dim + 2);
        }
        if (floats <= kSplitMaxFloats) {
            for (const auto& xp : st) {
                SplitTask& x = *xp;
                const std::size_t slots = x.tb.slots(group_heads);
                const std::size_t rows = static_cast<std::size_t>(x.c.task->i1 - x.c.task->i0) * group_heads;
                at_least(x.logits, slots * kKvPageTokens);
                std::fill_n(at_least(x.part_max, static_cast<std::size_t>(x.parts) * rows), x.parts * rows,
                            -std::numeric_limits<float>::infinity());
                at_least(x.alpha, slots);
                at_least(x.l_b, slots);
                at_least(x.o, slots * static_cast<std::size_t>(shape.head_dim));
                x.parts_left.store(x.parts, std::memory_order_relaxed);
            }
            attend_split(st, out);
            return;
        }
        // Too large to keep: split the group's query heads over tasks instead (each re-reads the group's blocks;
        // every head's result is its own, so nothing changes).
        const int head_split = std::min<int>(group_heads, static_cast<int>(threads / tasks.size()));
        if (head_split > 1) {
            std::vector<Task> split;
            for (const Task& t : tasks)
                for (int p = 0; p < head_split; ++p)
                    split.push_back(Task{t.seq, t.group, t.i0, t.i1, group_heads * p / head_split,
                                         group_heads * (p + 1) / head_split});
            tasks.swap(split);
        }
    }
    parallel_for(tasks.size(), 1, [&](std::size_t begin, std::size_t end) {
        Scratch& s = thread_scratch();
        TaskBlocks tb;
        for (std::size_t t = begin; t < end; ++t) {
            const TaskContext c{&kv, &seqs[tasks[t].seq], &tasks[t], q, &shape, q8};
            plan_task(seqs[tasks[t].seq], tasks[t], selected, topk, shape.num_kv_heads, tb);
            attend_task(c, tb, out, s);
        }
    });
}

}  // namespace

void dense_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                     const AttentionShape& shape, AttentionNumerics numerics, float* out) {
    attend(kv, seqs, q, nullptr, 0, shape, numerics, out);
}

void sparse_attention(const KvLayerView& kv, std::span<const AttentionSeq> seqs, const float* q,
                      const std::int32_t* selected, int topk, const AttentionShape& shape, AttentionNumerics numerics,
                      float* out) {
    MSA_CHECK(selected != nullptr && topk > 0, "sparse attention needs a block selection");
    attend(kv, seqs, q, selected, topk, shape, numerics, out);
}

}  // namespace msa::cpu
