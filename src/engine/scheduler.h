// Continuous batching (vLLM v1 style): each step takes decode tokens of running sequences first, then prefill
// chunks of running sequences, then admits waiting sequences FCFS, all under a token budget per step (chunked
// prefill) and max_num_seqs. Pages come from the BlockManager; a waiting sequence first reuses the longest
// cached prefix of full blocks (or, for n > 1, its sibling's prompt pages). When pages run out the newest running
// sequence is preempted by recompute (pages dropped, recomputed later from its tokens).
//
// Ownership: the caller owns Sequence objects; the scheduler holds pointers to the waiting and running ones and
// owns their page references. finish() releases a sequence's pages at once and forgets it.
#pragma once

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "model/forward_batch.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace msa {

struct SchedulerConfig {
    std::int32_t num_pages = 0;
    std::int32_t page_size = 128;
    std::int32_t max_num_seqs = 256;             // running sequences at most
    std::int32_t max_num_batched_tokens = 8192;  // token budget of one step
    std::int32_t max_model_len = 0;              // prompt + output tokens of one sequence at most
    // Largest prefill chunk one sequence gets per step (0: only the budget limits it); keeps a long prompt from
    // taking a whole step when others wait (vLLM's long_prefill_token_threshold).
    std::int32_t long_prefill_token_threshold = 0;
    bool enable_prefix_caching = true;
};

struct ScheduledSequence {
    Sequence* seq = nullptr;
    std::int32_t num_new_tokens = 0;  // tokens in this step, drafts included
    std::int32_t num_drafts = 0;      // speculative tokens at the end of the step's tokens
    std::int32_t num_logits = 0;      // rows of logits this sequence gets (0 for a non-final prefill chunk)
};

struct ScheduledStep {
    std::vector<ScheduledSequence> seqs;  // in batch order, matching batch.seqs
    ForwardBatch batch;
    std::vector<Sequence*> preempted;  // sequences preempted while building this step
    std::vector<Sequence*> admitted;   // waiting sequences that became running in this step
    std::int32_t num_tokens = 0;
    std::int32_t num_logits = 0;
    std::vector<std::vector<std::int32_t>> token_buffers;  // storage for steps that carry drafts

    bool empty() const { return seqs.empty(); }
};

class Scheduler {
public:
    explicit Scheduler(const SchedulerConfig& config);

    const SchedulerConfig& config() const { return config_; }
    const BlockManager& block_manager() const { return blocks_; }
    BlockManager& block_manager() { return blocks_; }

    // Queues a new sequence (status waiting, no pages). Its prompt's block hashes are computed here when prefix
    // caching is on and the caller has not done it already.
    void add(Sequence* seq);
    // Picks the work of one step. Every sequence in the result has pages covering its new tokens.
    ScheduledStep schedule();
    // After the forward pass: the step's tokens (drafts excepted) are computed; full blocks are published.
    void complete_step(const ScheduledStep& step);
    // Appends a sampled token to a running sequence (it is computed in a later step).
    void append_token(Sequence& seq, std::int32_t token);
    // Speculative verification: the first `accepted` drafts become tokens (their K/V were written in the step);
    // the rest are dropped. Call before append_token() of the correction or bonus token.
    void accept_drafts(Sequence& seq, std::int32_t accepted);
    // Ends a sequence (finished, cancelled or failed): releases its pages now and forgets it.
    void finish(Sequence& seq);

    std::int32_t num_running() const { return static_cast<std::int32_t>(running_.size()); }
    std::int32_t num_waiting() const { return static_cast<std::int32_t>(waiting_.size()); }
    std::int64_t num_preemptions() const { return num_preemptions_; }
    const std::vector<Sequence*>& running() const { return running_; }

    // Throws msa::Error unless: the block manager is consistent, every page's reference count equals the number
    // of page-table entries naming it, waiting sequences hold no pages, and running ones hold exactly the pages
    // their computed tokens need (or more, for scheduled-but-rejected drafts).
    void check_invariants() const;

private:
    using WaitKey = std::pair<std::uint64_t, std::int32_t>;  // (arrival, index): FCFS order

    std::int32_t pages_for(std::int32_t num_tokens) const {
        return (num_tokens + config_.page_size - 1) / config_.page_size;
    }
    std::int32_t prefill_chunk(const Sequence& seq, std::int32_t remaining, std::int32_t budget) const;
    bool fork_ready(const Sequence& seq) const;
    bool try_admit(Sequence& seq, std::int32_t budget, ScheduledStep& step);
    void preempt(Sequence& seq, ScheduledStep& step);
    void add_to_step(Sequence& seq, std::int32_t num_new, ScheduledStep& step);
    void register_computed_blocks(Sequence& seq);

    SchedulerConfig config_;
    BlockManager blocks_;
    std::vector<Sequence*> running_;  // in admission order: the last is the first to be preempted
    std::map<WaitKey, Sequence*> waiting_;
    std::int64_t num_preemptions_ = 0;
};

}  // namespace msa
