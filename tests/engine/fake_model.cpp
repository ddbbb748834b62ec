#include "engine/fake_model.h"

#include "core/error.h"
#include "engine/request_rng.h"

#include <algorithm>

namespace msa::testing {

FakeModel::FakeModel(std::int32_t vocab_size, std::int32_t num_pages, std::int32_t max_model_len,
                     std::int32_t page_size)
    : vocab_size_(vocab_size), num_pages_(num_pages), max_model_len_(max_model_len), page_size_(page_size) {
    kv_.resize(static_cast<std::size_t>(num_pages) * page_size);
}

std::uint64_t FakeModel::chain(std::uint64_t previous, std::int32_t token, std::int32_t position) {
    return RequestRng::mix(
        previous ^ RequestRng::mix((static_cast<std::uint64_t>(token) << 32) ^ static_cast<std::uint32_t>(position)));
}

void FakeModel::logits_for_state(std::uint64_t state, float* out) const {
    // A peaked, history-dependent distribution: random logits in [0, 4) plus a strong favourite.
    for (std::int32_t v = 0; v < vocab_size_; ++v) {
        const std::uint64_t h = RequestRng::mix(state + static_cast<std::uint64_t>(v) * 0x9E3779B97F4A7C15ull);
        out[v] = static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 4.0);
    }
    out[state % static_cast<std::uint64_t>(vocab_size_)] += 3.0f;
}

std::vector<float> FakeModel::reference_logits(std::span<const std::int32_t> tokens) const {
    std::uint64_t state = kChainStart;
    for (std::size_t i = 0; i < tokens.size(); ++i) state = chain(state, tokens[i], static_cast<std::int32_t>(i));
    std::vector<float> logits(vocab_size_);
    logits_for_state(state, logits.data());
    return logits;
}

FakeModel::Slot& FakeModel::slot(std::span<const std::int32_t> pages, std::int32_t position) {
    const std::size_t block = static_cast<std::size_t>(position / page_size_);
    MSA_CHECK(block < pages.size(), "fake model: position {} is beyond the {} pages of the sequence.", position,
              pages.size());
    const std::int32_t page = pages[block];
    MSA_CHECK(page >= 0 && page < num_pages_, "fake model: page id {} is out of range.", page);
    return kv_[static_cast<std::size_t>(page) * page_size_ + position % page_size_];
}

void FakeModel::forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out) {
    ++num_forward_calls;
    std::size_t rows = 0;
    for (const SequenceStep& s : batch.seqs) {
        MSA_CHECK(s.num_logits >= 0 && s.num_logits <= static_cast<std::int32_t>(s.tokens.size()),
                  "fake model: num_logits {} for {} tokens.", s.num_logits, s.tokens.size());
        rows += s.num_logits;
        if (fail_on_token >= 0 && std::find(s.tokens.begin(), s.tokens.end(), fail_on_token) != s.tokens.end()) {
            throw Error("fake model: injected failure");
        }
    }
    out.logits.assign(rows * vocab_size_, 0.0f);
    std::size_t row = 0;
    for (const SequenceStep& s : batch.seqs) {
        const auto n = static_cast<std::int32_t>(s.tokens.size());
        MSA_CHECK(s.past_len + n <= max_model_len_, "fake model: sequence of {} tokens exceeds max_model_len {}.",
                  s.past_len + n, max_model_len_);
        std::uint64_t state = kChainStart;
        if (s.past_len > 0) {
            const Slot& prev = slot(s.pages, s.past_len - 1);
            MSA_CHECK(prev.position == s.past_len - 1,
                      "fake model: reading position {} from a slot that holds position {} (stale or unwritten page).",
                      s.past_len - 1, prev.position);
            state = prev.state;
        }
        for (std::int32_t j = 0; j < n; ++j) {
            const std::int32_t pos = s.past_len + j;
            state = chain(state, s.tokens[j], pos);
            if (on_write) on_write(s.pages[pos / page_size_]);
            Slot& dst = slot(s.pages, pos);
            dst.state = state;
            dst.position = pos;
            if (j >= n - s.num_logits) {
                if (!skip_logits) logits_for_state(state, out.logits.data() + row * vocab_size_);
                ++row;
            }
        }
        num_tokens_processed += n;
    }
    if (!options.tap_layers.empty()) write_taps(batch, options.tap_layers, out.hidden_taps);
}

void FakeModel::write_taps(const ForwardBatch& batch, const std::vector<int>& layers, std::vector<float>& taps) {
    std::size_t total = 0;
    for (const SequenceStep& s : batch.seqs) total += s.tokens.size();
    taps.assign(layers.size() * total * kTapHidden, 0.0f);
    for (std::size_t k = 0; k < layers.size(); ++k) {
        std::size_t t = 0;
        for (const SequenceStep& s : batch.seqs) {
            for (std::size_t j = 0; j < s.tokens.size(); ++j, ++t) {
                float* h = taps.data() + (k * total + t) * kTapHidden;
                h[0] = static_cast<float>(layers[k]);
                h[1] = static_cast<float>(s.past_len + static_cast<std::int32_t>(j));
                h[2] = static_cast<float>(s.tokens[j]);
            }
        }
    }
}

}  // namespace msa::testing
