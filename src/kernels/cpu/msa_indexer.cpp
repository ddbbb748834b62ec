#include "kernels/cpu/msa_indexer.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/softmax_pv.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace msa::cpu {
namespace {

constexpr std::int32_t kIndexQueryTile = 32;

// Scores of blocks [b_begin, b_end) only; each block's scores are computed the same
// way whatever the range, so splitting the blocks over threads does not change any result.
void block_scores_range(const PagedRows& index_k, const AttentionSeq& seq, const float* iq, int groups, std::int32_t i0,
                        std::int32_t i1, AttentionNumerics numerics, float* scores, std::int64_t ld,
                        std::int32_t b_begin, std::int32_t b_end) {
    const int D = index_k.dim;
    const bool q8 = numerics == AttentionNumerics::q8kv4;
    const std::int32_t last_pos = query_position(seq, i1 - 1);
    if (last_pos < 0) return;
    const std::int64_t rows = static_cast<std::int64_t>(i1 - i0) * groups;
    std::vector<float> a(static_cast<std::size_t>(rows * D));
    std::memcpy(a.data(), iq + (seq.q_offset + i0) * groups * D, sizeof(float) * a.size());
    if (q8) round_rows_to_e4m3(a.data(), static_cast<long>(a.size()));
    std::vector<float> keys;  // decoded index keys when dot_kv_rows does not fuse
    std::vector<float> dots(static_cast<std::size_t>(rows * kKvPageTokens));
    const std::int32_t last_block = std::min(last_pos / kKvPageTokens, b_end - 1);
    for (std::int32_t b = b_begin; b <= last_block; ++b) {
        // Queries whose local block is before b do not look at it; start at the first that does.
        std::int32_t first = i0;
        while (first < i1 && query_position(seq, first) < b * kKvPageTokens) ++first;
        if (first == i1) continue;
        const int valid = std::min(kKvPageTokens, seq.kv_len - b * kKvPageTokens);
        const std::int64_t off = static_cast<std::int64_t>(first - i0) * groups;
        dot_kv_rows(index_k, seq.pages[b], valid, q8 ? KvRead::e4m3 : KvRead::exact, a.data() + off * D, rows - off,
                    dots.data() + off * kKvPageTokens, kKvPageTokens, keys);
        for (std::int32_t i = first; i < i1; ++i) {
            const int visible = std::min(valid, query_position(seq, i) - b * kKvPageTokens + 1);
            for (int g = 0; g < groups; ++g) {
                const std::int64_t row = static_cast<std::int64_t>(i - i0) * groups + g;
                const float* d = dots.data() + row * kKvPageTokens;
                scores[row * ld + b] = scaled_max(d, visible, 1.0f, -std::numeric_limits<float>::infinity());
            }
        }
    }
}

}  // namespace

void msa_block_scores(const PagedRows& index_k, const AttentionSeq& seq, const float* iq, int groups, std::int32_t i0,
                      std::int32_t i1, AttentionNumerics numerics, float* scores, std::int64_t ld) {
    block_scores_range(index_k, seq, iq, groups, i0, i1, numerics, scores, ld, 0, kMaxMsaBlocks);
}

void msa_select_blocks(const PagedRows& index_k, std::span<const AttentionSeq> seqs, const float* iq, int groups,
                       const MsaIndexOptions& options, std::int32_t* selected) {
    MSA_CHECK(options.topk >= 1, "MSA top-k must be at least 1, got {}", options.topk);
    struct Task {
        std::size_t seq;
        std::int32_t i0, i1;
    };
    std::vector<Task> tasks;
    for (std::size_t si = 0; si < seqs.size(); ++si) {
        MSA_CHECK(seqs[si].kv_len <= kMaxMsaBlocks * kKvPageTokens,
                  "MSA supports at most {} tokens per sequence, got {}", kMaxMsaBlocks * kKvPageTokens,
                  seqs[si].kv_len);
        for (std::int32_t i0 = 0; i0 < seqs[si].q_len; i0 += kIndexQueryTile)
            tasks.push_back(Task{si, i0, std::min(seqs[si].q_len, i0 + kIndexQueryTile)});
    }
    // Scores for one task: in parallel over blocks when there are fewer tasks than threads (decode), else serially
    // inside a task that runs in parallel with the others (prefill).
    auto scores_of = [&](const Task& task, std::vector<float>& scores, bool split_blocks) {
        const AttentionSeq& seq = seqs[task.seq];
        const std::int32_t last_pos = query_position(seq, task.i1 - 1);
        const std::int64_t ld = std::max(1, last_pos / kKvPageTokens + 1);
        scores.assign(static_cast<std::size_t>((task.i1 - task.i0) * groups * ld), 0.0f);
        if (!split_blocks) {
            block_scores_range(index_k, seq, iq, groups, task.i0, task.i1, options.numerics, scores.data(), ld, 0,
                               static_cast<std::int32_t>(ld));
        } else {
            parallel_for(static_cast<std::size_t>(ld), 2, [&](std::size_t b0, std::size_t b1) {
                block_scores_range(index_k, seq, iq, groups, task.i0, task.i1, options.numerics, scores.data(), ld,
                                   static_cast<std::int32_t>(b0), static_cast<std::int32_t>(b1));
            });
        }
        return ld;
    };
    auto select = [&](const Task& task, const std::vector<float>& scores, std::int64_t ld) {
        const AttentionSeq& seq = seqs[task.seq];
        for (std::int32_t i = task.i0; i < task.i1; ++i) {
            const std::int32_t pos = query_position(seq, i);
            for (int g = 0; g < groups; ++g) {
                std::int32_t* out = selected + ((seq.q_offset + i) * groups + g) * options.topk;
                const float* row = scores.data() + (static_cast<std::int64_t>(i - task.i0) * groups + g) * ld;
                select_top_blocks(row, pos < 0 ? -1 : pos / kKvPageTokens, options.topk, options.topk_mode, out);
            }
        }
    };
    if (tasks.size() < static_cast<std::size_t>(num_threads())) {
        std::vector<float> scores;
        for (const Task& task : tasks) select(task, scores, scores_of(task, scores, true));
        return;
    }
    parallel_for(tasks.size(), 1, [&](std::size_t begin, std::size_t end) {
        std::vector<float> scores;
        for (std::size_t ti = begin; ti < end; ++ti) select(tasks[ti], scores, scores_of(tasks[ti], scores, false));
    });
}

}  // namespace msa::cpu
