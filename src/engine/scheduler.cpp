#include "engine/scheduler.h"

#include "core/error.h"

#include <algorithm>
#include <unordered_map>

namespace msa {

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config), blocks_(config.num_pages, config.page_size, config.enable_prefix_caching) {
    MSA_CHECK(config_.max_num_seqs > 0, "max_num_seqs must be positive, got {}.", config_.max_num_seqs);
    MSA_CHECK(config_.max_num_batched_tokens > 0, "max_num_batched_tokens must be positive, got {}.",
              config_.max_num_batched_tokens);
    MSA_CHECK(config_.max_model_len > 0, "max_model_len must be positive, got {}.", config_.max_model_len);
    MSA_CHECK(pages_for(config_.max_model_len) <= config_.num_pages,
              "max_model_len {} needs {} KV pages of {} tokens, but the KV cache has only {} pages; lower "
              "max_model_len or give the KV cache more memory.",
              config_.max_model_len, pages_for(config_.max_model_len), config_.page_size, config_.num_pages);
}

void Scheduler::add(Sequence* seq) {
    MSA_CHECK(seq->status == SequenceStatus::waiting && seq->pages.empty() && seq->num_computed == 0,
              "Scheduler::add: sequence {}/{} is not a fresh waiting sequence.", seq->request_id, seq->index);
    MSA_CHECK(seq->num_prompt > 0 && seq->num_tokens() <= config_.max_model_len,
              "Scheduler::add: sequence {}/{} has {} tokens (max_model_len {}).", seq->request_id, seq->index,
              seq->num_tokens(), config_.max_model_len);
    if (config_.enable_prefix_caching) {
        extend_block_hashes(seq->tokens, config_.page_size, seq->cache_salt, seq->block_hashes);
    }
    auto [it, inserted] = waiting_.emplace(WaitKey{seq->arrival, seq->index}, seq);
    MSA_CHECK(inserted, "Scheduler::add: sequence {}/{} is already queued.", seq->request_id, seq->index);
}

std::int32_t Scheduler::prefill_chunk(const Sequence&, std::int32_t remaining, std::int32_t budget) const {
    std::int32_t n = std::min(remaining, budget);
    if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
    return n;
}

bool Scheduler::fork_ready(const Sequence& seq) const {
    const Sequence* src = seq.fork_source;
    if (src == nullptr || src->status == SequenceStatus::finished) return true;
    return src->status == SequenceStatus::running && src->prefill_done();
}

ScheduledStep Scheduler::schedule() {
    ScheduledStep step;
    std::int32_t budget = config_.max_num_batched_tokens;

    // 1. Token counts of running sequences: decode tokens (with their drafts) first, then prefill chunks.
    std::vector<std::int32_t> plan(running_.size(), 0);
    for (std::size_t i = 0; i < running_.size(); ++i) {
        Sequence& seq = *running_[i];
        if (seq.num_tokens() - seq.num_computed != 1) continue;
        std::int32_t n = 1 + static_cast<std::int32_t>(seq.draft_tokens.size());
        if (n > budget) {
            seq.draft_tokens.clear();  // not enough budget to verify: plain decode this step
            n = 1;
        }
        if (n > budget) continue;
        plan[i] = n;
        budget -= n;
    }
    for (std::size_t i = 0; i < running_.size(); ++i) {
        Sequence& seq = *running_[i];
        const std::int32_t remaining = seq.num_tokens() - seq.num_computed;
        if (remaining <= 1 || budget == 0) continue;
        seq.draft_tokens.clear();  // drafts only ride on decode steps
        plan[i] = prefill_chunk(seq, remaining, budget);
        budget -= plan[i];
    }

    // 2. Pages for them, oldest first; when the pool runs dry, preempt the newest running sequence.
    for (std::size_t i = 0; i < running_.size();) {
        Sequence& seq = *running_[i];
        std::int32_t n = plan[i];
        if (n == 0) {
            ++i;
            continue;
        }
        const std::int32_t have = static_cast<std::int32_t>(seq.pages.size());
        std::int32_t need = std::max(0, pages_for(seq.num_computed + n) - have);
        if (need > blocks_.num_free_pages() && n > 1 && seq.draft_tokens.empty()) {
            // A prefill chunk can shrink to what the free pages hold instead of preempting anyone.
            const std::int32_t fits = (have + blocks_.num_free_pages()) * config_.page_size - seq.num_computed;
            if (fits >= 1) {
                n = std::min(n, fits);
                need = std::max(0, pages_for(seq.num_computed + n) - have);
            }
        }
        bool preempted_self = false;
        while (need > blocks_.num_free_pages()) {
            Sequence* victim = running_.back();
            preempt(*victim, step);
            plan.pop_back();
            if (victim == &seq) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self) continue;  // it was the last one: the loop ends
        const bool ok = blocks_.allocate(need, seq.pages);
        MSA_CHECK(ok, "Scheduler: page allocation failed after preemption (internal error).");
        add_to_step(seq, n, step);
        ++i;
    }
    budget = config_.max_num_batched_tokens - step.num_tokens;  // shrunk chunks and preempted plans give back

    // 3. Admit waiting sequences in FCFS order (not in a step that had to preempt: memory is short).
    if (step.preempted.empty()) {
        for (auto it = waiting_.begin();
             it != waiting_.end() && budget > 0 && static_cast<std::int32_t>(running_.size()) < config_.max_num_seqs;) {
            Sequence& seq = *it->second;
            if (!fork_ready(seq)) {
                ++it;  // a sibling waits for its n > 1 leader's prefill; it does not hold up the queue
                continue;
            }
            if (!try_admit(seq, budget, step)) break;  // head of line does not fit: keep FCFS order
            budget -= step.seqs.back().num_new_tokens;
            it = waiting_.erase(it);
        }
    }
    return step;
}

bool Scheduler::try_admit(Sequence& seq, std::int32_t budget, ScheduledStep& step) {
    const std::int32_t ps = config_.page_size;
    // At least the last token is computed (its logits are needed), so reuse stops one token short.
    const std::int32_t max_reuse_blocks = (seq.num_tokens() - 1) / ps;
    std::vector<PageId> reuse;
    const Sequence* src = seq.fork_source;
    if (src != nullptr && src->status == SequenceStatus::running && src->prefill_done()) {
        const std::int32_t k = std::min({max_reuse_blocks, src->num_computed / ps, seq.num_prompt / ps});
        reuse.assign(src->pages.begin(), src->pages.begin() + k);
    }
    if (config_.enable_prefix_caching) {
        const std::size_t n_lookup = std::min<std::size_t>(max_reuse_blocks, seq.block_hashes.size());
        std::vector<PageId> hit = blocks_.lookup(std::span<const BlockHash>(seq.block_hashes).first(n_lookup));
        if (hit.size() > reuse.size()) reuse = std::move(hit);
    }
    const std::int32_t reused_tokens = static_cast<std::int32_t>(reuse.size()) * ps;
    const std::int32_t n = prefill_chunk(seq, seq.num_tokens() - reused_tokens, budget);
    const std::int32_t need = pages_for(reused_tokens + n) - static_cast<std::int32_t>(reuse.size());
    if (need + blocks_.count_unreferenced(reuse) > blocks_.num_free_pages()) return false;

    blocks_.acquire(reuse);
    seq.pages = std::move(reuse);
    const bool ok = blocks_.allocate(need, seq.pages);
    MSA_CHECK(ok, "Scheduler: page allocation failed after the free-page check (internal error).");
    if (config_.enable_prefix_caching) blocks_.record_lookup(seq.num_tokens(), reused_tokens);
    seq.num_computed = reused_tokens;
    seq.num_registered_blocks = reused_tokens / ps;
    if (seq.num_cached_tokens < 0) seq.num_cached_tokens = reused_tokens;
    seq.status = SequenceStatus::running;
    if (seq.fork_source != nullptr && seq.fork_source->status == SequenceStatus::finished) seq.fork_source = nullptr;
    running_.push_back(&seq);
    step.admitted.push_back(&seq);
    add_to_step(seq, n, step);
    return true;
}

void Scheduler::add_to_step(Sequence& seq, std::int32_t num_new, ScheduledStep& step) {
    ScheduledSequence s;
    s.seq = &seq;
    s.num_new_tokens = num_new;
    const std::int32_t committed_new = seq.num_tokens() - seq.num_computed;
    const bool reaches_end = num_new >= committed_new;
    s.num_drafts = reaches_end ? num_new - committed_new : 0;
    s.num_logits = reaches_end ? 1 + s.num_drafts : 0;

    SequenceStep ss;
    if (s.num_drafts > 0) {
        std::vector<std::int32_t> buf(seq.tokens.begin() + seq.num_computed, seq.tokens.end());
        buf.insert(buf.end(), seq.draft_tokens.begin(), seq.draft_tokens.begin() + s.num_drafts);
        step.token_buffers.push_back(std::move(buf));
        ss.tokens = step.token_buffers.back();
    } else {
        ss.tokens = std::span<const std::int32_t>(seq.tokens).subspan(seq.num_computed, num_new);
    }
    ss.past_len = seq.num_computed;
    ss.pages = seq.pages;
    ss.num_logits = s.num_logits;
    step.batch.seqs.push_back(ss);
    step.seqs.push_back(s);
    step.num_tokens += num_new;
    step.num_logits += s.num_logits;
}

void Scheduler::preempt(Sequence& seq, ScheduledStep& step) {
    auto it = std::find(running_.begin(), running_.end(), &seq);
    MSA_CHECK(it != running_.end(), "Scheduler::preempt: sequence {}/{} is not running.", seq.request_id, seq.index);
    running_.erase(it);
    blocks_.release(seq.pages);
    seq.pages.clear();
    seq.num_computed = 0;
    seq.num_registered_blocks = 0;
    seq.draft_tokens.clear();
    seq.status = SequenceStatus::waiting;
    ++seq.num_preemptions;
    ++num_preemptions_;
    waiting_.emplace(WaitKey{seq.arrival, seq.index}, &seq);
    step.preempted.push_back(&seq);
}

void Scheduler::register_computed_blocks(Sequence& seq) {
    if (!config_.enable_prefix_caching) return;
    const std::int32_t full = std::min(seq.num_computed, seq.num_tokens()) / config_.page_size;
    for (std::int32_t b = seq.num_registered_blocks; b < full; ++b)
        blocks_.register_block(seq.pages[b], seq.block_hashes[b]);
    seq.num_registered_blocks = std::max(seq.num_registered_blocks, full);
}

void Scheduler::complete_step(const ScheduledStep& step) {
    for (const ScheduledSequence& s : step.seqs) {
        Sequence& seq = *s.seq;
        if (seq.status != SequenceStatus::running) continue;  // finished while the step ran (cannot happen today)
        seq.num_computed += s.num_new_tokens - s.num_drafts;
        register_computed_blocks(seq);
    }
}

void Scheduler::append_token(Sequence& seq, std::int32_t token) {
    seq.tokens.push_back(token);
    if (config_.enable_prefix_caching) {
        extend_block_hashes(seq.tokens, config_.page_size, seq.cache_salt, seq.block_hashes);
    }
}

void Scheduler::accept_drafts(Sequence& seq, std::int32_t accepted) {
    MSA_CHECK(accepted >= 0 && accepted <= static_cast<std::int32_t>(seq.draft_tokens.size()),
              "Scheduler::accept_drafts: {} accepted of {} drafts.", accepted, seq.draft_tokens.size());
    MSA_CHECK(seq.num_computed == seq.num_tokens(), "Scheduler::accept_drafts: the verify step is not complete.");
    seq.tokens.insert(seq.tokens.end(), seq.draft_tokens.begin(), seq.draft_tokens.begin() + accepted);
    seq.num_computed += accepted;
    seq.draft_tokens.clear();
    if (config_.enable_prefix_caching) {
        extend_block_hashes(seq.tokens, config_.page_size, seq.cache_salt, seq.block_hashes);
    }
    register_computed_blocks(seq);
}

void Scheduler::finish(Sequence& seq) {
    if (seq.status == SequenceStatus::running) {
        auto it = std::find(running_.begin(), running_.end(), &seq);
        MSA_CHECK(it != running_.end(), "Scheduler::finish: running sequence {}/{} is not in the running list.",
                  seq.request_id, seq.index);
        running_.erase(it);
    } else if (seq.status == SequenceStatus::waiting) {
        waiting_.erase(WaitKey{seq.arrival, seq.index});
    }
    blocks_.release(seq.pages);
    seq.pages.clear();
    seq.draft_tokens.clear();
    seq.status = SequenceStatus::finished;
}

void Scheduler::check_invariants() const {
    blocks_.check_invariants();
    MSA_CHECK(static_cast<std::int32_t>(running_.size()) <= config_.max_num_seqs,
              "scheduler: {} running sequences exceed max_num_seqs {}.", running_.size(), config_.max_num_seqs);
    std::unordered_map<PageId, std::int32_t> refs;
    for (const Sequence* seq : running_) {
        MSA_CHECK(seq->status == SequenceStatus::running,
                  "scheduler: sequence {}/{} in the running list is not running.", seq->request_id, seq->index);
        MSA_CHECK(seq->num_computed >= 0 && seq->num_computed <= seq->num_tokens(),
                  "scheduler: sequence {}/{} has {} computed of {} tokens.", seq->request_id, seq->index,
                  seq->num_computed, seq->num_tokens());
        MSA_CHECK(static_cast<std::int32_t>(seq->pages.size()) >= pages_for(seq->num_computed),
                  "scheduler: sequence {}/{} has {} pages for {} computed tokens.", seq->request_id, seq->index,
                  seq->pages.size(), seq->num_computed);
        std::vector<PageId> own = seq->pages;
        std::sort(own.begin(), own.end());
        MSA_CHECK(std::adjacent_find(own.begin(), own.end()) == own.end(),
                  "scheduler: sequence {}/{} names one page twice.", seq->request_id, seq->index);
        for (PageId p : seq->pages) ++refs[p];
        // A page that is published in the cache must hold exactly this sequence's block (content identity).
        const std::int32_t full = std::min<std::int32_t>(seq->num_computed / config_.page_size,
                                                         static_cast<std::int32_t>(seq->block_hashes.size()));
        for (std::int32_t b = 0; b < full; ++b) {
            const BlockKey* key = blocks_.registered_key(seq->pages[b]);
            MSA_CHECK(key == nullptr || *key == block_key(seq->block_hashes[b]),
                      "scheduler: sequence {}/{} block {} maps to page {} cached for other content.", seq->request_id,
                      seq->index, b, seq->pages[b]);
        }
    }
    for (const auto& [key, seq] : waiting_) {
        MSA_CHECK(seq->status == SequenceStatus::waiting && seq->pages.empty() && seq->num_computed == 0,
                  "scheduler: waiting sequence {}/{} holds pages or computed tokens.", seq->request_id, seq->index);
    }
    for (PageId p = 0; p < blocks_.num_pages(); ++p) {
        auto it = refs.find(p);
        const std::int32_t expected = it == refs.end() ? 0 : it->second;
        MSA_CHECK(blocks_.ref_count(p) == expected,
                  "scheduler: page {} has reference count {} but {} page-table "
                  "entries.",
                  p, blocks_.ref_count(p), expected);
    }
}

}  // namespace msa
