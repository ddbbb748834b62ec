// A deterministic stand-in for the model, for engine tests and benchmarks. It keeps a fake KV cache: the slot of
// each token holds a hash chained from the previous token's slot, read back through the page table. So the logits
// after a token are a function of the sequence's whole token history *as stored in the pages*: a wrong page table,
// a stale or wrongly shared page, or a wrong past_len changes the output. Reading a slot that was never written for
// that position throws.
#pragma once

#include "engine/block_manager.h"
#include "engine/model_executor.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace msa::testing {

class FakeModel : public ModelExecutor {
public:
    FakeModel(std::int32_t vocab_size, std::int32_t num_pages, std::int32_t max_model_len,
              std::int32_t page_size = 128);

    void forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out) override;
    std::int32_t vocab_size() const override { return vocab_size_; }
    std::int32_t num_kv_pages() const override { return num_pages_; }
    std::int32_t page_size() const override { return page_size_; }
    std::int32_t max_model_len() const override { return max_model_len_; }

    // Called for every page the model writes K/V into (tests check it is private to the sequence).
    std::function<void(PageId)> on_write;
    // When set, forward() throws for a batch that contains this token (tests of model failures).
    std::int32_t fail_on_token = -1;
    // Skip the logits computation (benchmarks of scheduler overhead): rows are left at zero.
    bool skip_logits = false;

    // Hidden-state taps (ForwardOptions::tap_layers): kTapHidden values per tap and token,
    // {tap layer, position, token}, so a drafter can check it was given the right rows.
    static constexpr std::size_t kTapHidden = 3;

    std::int64_t num_forward_calls = 0;
    std::int64_t num_tokens_processed = 0;

    static void write_taps(const ForwardBatch& batch, const std::vector<int>& layers, std::vector<float>& taps);

    // The chain and the logits, for an independent reference that needs no pages.
    static std::uint64_t chain(std::uint64_t previous, std::int32_t token, std::int32_t position);
    static constexpr std::uint64_t kChainStart = 0x5EED5EED5EED5EEDull;
    void logits_for_state(std::uint64_t state, float* out) const;
    // Logits after the last of `tokens`, computed directly from the token list.
    std::vector<float> reference_logits(std::span<const std::int32_t> tokens) const;

private:
    struct Slot {
        std::uint64_t state = 0;
        std::int32_t position = -1;  // the position whose K/V this slot holds; -1: never written
    };

    Slot& slot(std::span<const std::int32_t> pages, std::int32_t position);

    std::int32_t vocab_size_, num_pages_, max_model_len_, page_size_;
    std::vector<Slot> kv_;
};

}  // namespace msa::testing
