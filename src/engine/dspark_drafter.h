// The DSpark drafter of the engine (dspark.md): per (request, sample) it keeps the drafter's context keys/values,
// computed from the target's taps as the target computes each position (observe), and drafts greedily one block
// per propose (DSparkModel, model/dspark_model.h). Greedy drafts leave draft_probs empty: the rejection sampler
// then treats q as one-hot, which is lossless for every sampling mode.
//
// State of one sequence: the context K/V of every drafter layer for the positions [base, base + rows), one row per
// position with an "observed" flag. Only the last sliding_window (+ one block) positions can ever be attended to, so
// older rows are dropped (memory per sequence is bounded by ~1.25 x (window + block) rows x kv_dim x layers x 2
// floats). An observation of [p, q) replaces rows p .. q-1 and drops every row at or after q (they were computed
// for tokens the target has since replaced); propose drops rows at or after the anchor (rejected drafts).
// Positions never observed (prefix-cache hits the target did not recompute) are masked out of the context. A sample
// s > 0 of a request may use sample 0's row of a position it never observed when both have the same tokens up to
// and including that position (the shared prompt: their hidden states are then identical).
//
// propose() returns min(max_drafts, block_size) drafts (7 for M3.1's and the default model's drafter), fewer rows of
// the block going through the lm_head when fewer are asked for.
//
// Not thread-safe: the engine calls it from its engine thread only.
#pragma once

#include "engine/drafter.h"
#include "model/dspark_model.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace msa {

class DSparkDrafter : public Drafter {
public:
    explicit DSparkDrafter(std::unique_ptr<DSparkModel> model);

    std::vector<int> tap_layers() const override;
    void observe(std::uint64_t request_id, std::int32_t sample_index, std::int32_t first_position,
                 std::span<const std::int32_t> tokens, std::span<const float> taps) override;
    void release(std::uint64_t request_id) override;
    void propose(std::uint64_t request_id, std::int32_t sample_index, std::span<const std::int32_t> tokens,
                 std::int32_t max_drafts, std::vector<std::int32_t>& drafts, std::vector<float>& draft_probs) override;

    const DSparkModel& model() const { return *model_; }
    // Sequences (request, sample) with state, and the bytes their buffers hold (for tests and metrics).
    std::size_t num_sequences() const;
    std::size_t state_bytes() const;

private:
    struct Sequence {
        std::int32_t base = 0;  // position of row 0
        std::int64_t rows = 0;  // rows [0, rows) hold positions [base, base + rows)
        std::int64_t capacity = 0;
        std::vector<std::vector<float>> k, v;  // per drafter layer: K [kv_heads][capacity][head_dim], V transposed
                                               // [kv_heads][head_dim][capacity]
        std::vector<std::uint8_t> valid;       // [capacity]
        std::vector<std::int32_t> history;     // token observed at each position from 0, -1 where never observed
    };

    Sequence& sequence(std::uint64_t request_id, std::int32_t sample_index);
    const Sequence* find(std::uint64_t request_id, std::int32_t sample_index) const;
    // Makes the rows cover [new_base, new_base + span) (span <= max_rows_): keeps the rows already held there,
    // marks the others unobserved, grows the buffers when needed.
    void place(Sequence& s, std::int32_t new_base, std::int64_t span) const;
    // Drops rows and history at positions >= end.
    static void truncate(Sequence& s, std::int32_t end);

    std::unique_ptr<DSparkModel> model_;
    std::int64_t kv_dim_ = 0;
    std::int64_t keep_ = 0;      // positions any future block can attend to: sliding_window + block_size
    std::int64_t max_rows_ = 0;  // buffer rows at most: keep_ plus slack, so that shifting is rare
    std::unordered_map<std::uint64_t, std::map<std::int32_t, Sequence>> requests_;
};

// Loads the drafter of `drafter_dir` (normally <model_dir>/drafter; its config names the target directory, "..").
std::unique_ptr<DSparkDrafter> load_dspark_drafter(const std::string& drafter_dir,
                                                   const DSparkLoadOptions& options = {});

}  // namespace msa
