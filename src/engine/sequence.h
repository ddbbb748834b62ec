// One sequence as the scheduler sees it: its tokens, how many of them have K/V in its pages, and its page table.
// A request with n > 1 has n sequences with the same prompt. The engine keeps its own per-sequence output state
// (sampling history, text) next to this.
#pragma once

#include "engine/block_hash.h"
#include "engine/block_manager.h"

#include <cstdint>
#include <string>
#include <vector>

namespace msa {

enum class SequenceStatus { waiting, running, finished };

struct Sequence {
    std::uint64_t request_id = 0;
    std::int32_t index = 0;            // which of the request's n samples
    std::uint64_t arrival = 0;         // FCFS order: the engine's submission counter
    std::vector<std::int32_t> tokens;  // the prompt, then the generated tokens
    std::int32_t num_prompt = 0;
    std::string cache_salt;               // isolates prefix-cache entries between tenants
    std::vector<BlockHash> block_hashes;  // chained hashes of the full blocks of `tokens` (prefix caching on)
    // Speculative tokens to verify in the next step (1 + k tokens then go into the batch). Not part of `tokens`
    // until accepted.
    std::vector<std::int32_t> draft_tokens;

    // ---- Scheduler state ----
    SequenceStatus status = SequenceStatus::waiting;
    std::int32_t num_computed = 0;           // leading tokens whose K/V are in `pages`
    std::vector<PageId> pages;               // page table: pages[b] holds tokens [b * page_size, (b + 1) * page_size)
    std::int32_t num_registered_blocks = 0;  // leading full blocks already published to the prefix cache
    // n > 1: the sibling whose prompt pages this sequence shares once that sibling has finished its prefill.
    // Until then this sequence is not admitted (it would only recompute the same prompt).
    Sequence* fork_source = nullptr;
    std::int32_t num_cached_tokens = -1;  // tokens reused (cache or fork) at first admission; -1: never admitted
    std::int32_t num_preemptions = 0;

    std::int32_t num_tokens() const { return static_cast<std::int32_t>(tokens.size()); }
    std::int32_t num_output() const { return num_tokens() - num_prompt; }
    bool prefill_done() const { return num_computed >= num_prompt; }
};

}  // namespace msa
