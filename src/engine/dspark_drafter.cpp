#include "engine/dspark_drafter.h"

#include "core/error.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace msa {

DSparkDrafter::DSparkDrafter(std::unique_ptr<DSparkModel> model) : model_(std::move(model)) {
    MSA_CHECK(model_ != nullptr, "DSparkDrafter needs a model");
    const DSparkConfig& c = model_->config();
    kv_dim_ = c.kv_dim();
    keep_ = std::int64_t{c.sliding_window} + c.block_size;
    max_rows_ = keep_ + keep_ / 4 + 16;
}

std::vector<int> DSparkDrafter::tap_layers() const {
    return model_->config().target_layer_ids;
}

std::size_t DSparkDrafter::num_sequences() const {
    std::size_t n = 0;
    for (const auto& [id, samples] : requests_) n += samples.size();
    return n;
}

std::size_t DSparkDrafter::state_bytes() const {
    std::size_t bytes = 0;
    for (const auto& [id, samples] : requests_) {
        for (const auto& [index, s] : samples) {
            for (std::size_t l = 0; l < s.k.size(); ++l) bytes += (s.k[l].size() + s.v[l].size()) * sizeof(float);
            bytes += s.valid.size() + s.history.size() * sizeof(std::int32_t);
        }
    }
    return bytes;
}

DSparkDrafter::Sequence& DSparkDrafter::sequence(std::uint64_t request_id, std::int32_t sample_index) {
    return requests_[request_id][sample_index];
}

const DSparkDrafter::Sequence* DSparkDrafter::find(std::uint64_t request_id, std::int32_t sample_index) const {
    const auto r = requests_.find(request_id);
    if (r == requests_.end()) return nullptr;
    const auto s = r->second.find(sample_index);
    return s == r->second.end() ? nullptr : &s->second;
}

void DSparkDrafter::truncate(Sequence& s, std::int32_t end) {
    if (static_cast<std::int64_t>(s.history.size()) > end) s.history.resize(static_cast<std::size_t>(end));
    s.rows = std::clamp<std::int64_t>(std::int64_t{end} - s.base, 0, s.rows);
}

void DSparkDrafter::place(Sequence& s, std::int32_t new_base, std::int64_t span) const {
    const DSparkConfig& c = model_->config();
    const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
    const auto heads = static_cast<std::size_t>(c.num_key_value_heads);
    const auto D = static_cast<std::size_t>(c.head_dim);
    // Rows kept: positions held now that fall inside the new range.
    const std::int64_t keep_lo = std::max<std::int64_t>(s.base, new_base);
    const std::int64_t keep_hi = std::min<std::int64_t>(s.base + s.rows, std::int64_t{new_base} + span);
    const auto kept = static_cast<std::size_t>(std::max<std::int64_t>(keep_hi - keep_lo, 0));
    const auto from = static_cast<std::size_t>(std::max<std::int64_t>(keep_lo - s.base, 0));
    const auto to = static_cast<std::size_t>(std::max<std::int64_t>(keep_lo - new_base, 0));
    const auto old_capacity = static_cast<std::size_t>(s.capacity);
    if (s.capacity < span) {
        const std::int64_t capacity = std::min(max_rows_, std::max({span, 2 * s.capacity, std::int64_t{64}}));
        const auto cap = static_cast<std::size_t>(capacity);
        std::vector<std::vector<float>> k(layers), v(layers);
        std::vector<std::uint8_t> valid(cap, 0);
        for (std::size_t l = 0; l < layers; ++l) {
            k[l].resize(heads * cap * D);
            v[l].resize(heads * cap * D);
            for (std::size_t h = 0; kept > 0 && h < heads; ++h) {
                std::copy_n(s.k[l].data() + (h * old_capacity + from) * D, kept * D, k[l].data() + (h * cap + to) * D);
                for (std::size_t d = 0; d < D; ++d) {
                    std::copy_n(s.v[l].data() + (h * D + d) * old_capacity + from, kept,
                                v[l].data() + (h * D + d) * cap + to);
                }
            }
        }
        if (kept > 0) std::copy_n(s.valid.data() + from, kept, valid.data() + to);
        s.k = std::move(k);
        s.v = std::move(v);
        s.valid = std::move(valid);
        s.capacity = capacity;
    } else if (kept > 0 && from != to) {
        for (std::size_t l = 0; l < layers; ++l) {
            for (std::size_t h = 0; h < heads; ++h) {
                float* k = s.k[l].data() + h * old_capacity * D;
                std::memmove(k + to * D, k + from * D, kept * D * sizeof(float));
                for (std::size_t d = 0; d < D; ++d) {
                    float* vt = s.v[l].data() + (h * D + d) * old_capacity;
                    std::memmove(vt + to, vt + from, kept * sizeof(float));
                }
            }
        }
        std::memmove(s.valid.data() + to, s.valid.data() + from, kept);
    }
    // Rows of the new range not kept were never observed (as far as this sequence knows). Their K/V are zeroed: a
    // masked row gets weight 0 in attention, and 0 times a stale non-finite value would still be NaN.
    const auto cap = static_cast<std::size_t>(s.capacity);
    const auto clear = [&](std::size_t begin, std::size_t end) {
        if (begin >= end) return;
        std::fill(s.valid.begin() + static_cast<std::ptrdiff_t>(begin),
                  s.valid.begin() + static_cast<std::ptrdiff_t>(end), 0);
        for (std::size_t l = 0; l < layers; ++l) {
            for (std::size_t h = 0; h < heads; ++h) {
                std::fill_n(s.k[l].data() + (h * cap + begin) * D, (end - begin) * D, 0.0f);
                for (std::size_t d = 0; d < D; ++d)
                    std::fill_n(s.v[l].data() + (h * D + d) * cap + begin, end - begin, 0.0f);
            }
        }
    };
    const auto rows = static_cast<std::size_t>(span);
    if (kept > 0) {
        clear(0, to);
        clear(to + kept, rows);
    } else {
        clear(0, rows);
    }
    s.base = new_base;
    s.rows = span;
}

void DSparkDrafter::observe(std::uint64_t request_id, std::int32_t sample_index, std::int32_t first_position,
                            std::span<const std::int32_t> tokens, std::span<const float> taps) {
    const DSparkConfig& c = model_->config();
    const std::int64_t width = c.tap_width();
    MSA_CHECK(first_position >= 0, "DSpark observe: negative position {}", first_position);
    MSA_CHECK(taps.size() == tokens.size() * static_cast<std::size_t>(width),
              "DSpark observe: {} tokens need {} tap values ({} taps x hidden {}), got {}", tokens.size(),
              tokens.size() * static_cast<std::size_t>(width), c.target_layer_ids.size(), c.hidden_size, taps.size());
    MSA_CHECK(static_cast<std::int64_t>(tokens.size()) <= std::numeric_limits<std::int32_t>::max() - first_position,
              "DSpark observe: positions overflow");
    if (tokens.empty()) return;
    for (const std::int32_t t : tokens) {
        MSA_CHECK(t >= 0 && t < c.vocab_size, "DSpark observe: token {} is outside the vocabulary of {}", t,
                  c.vocab_size);
    }
    const std::int64_t p0 = first_position;
    const std::int64_t p1 = p0 + static_cast<std::int64_t>(tokens.size());
    Sequence& s = sequence(request_id, sample_index);

    if (static_cast<std::int64_t>(s.history.size()) < p1) s.history.resize(static_cast<std::size_t>(p1), -1);
    std::copy(tokens.begin(), tokens.end(), s.history.begin() + p0);
    s.history.resize(static_cast<std::size_t>(p1));  // what followed belonged to tokens since replaced

    // Only positions a future block can see are computed and kept: a later anchor is at least p1 - block_size.
    const std::int64_t lo = std::max<std::int64_t>(0, p1 - keep_);
    const std::int64_t q0 = std::max(p0, lo);
    std::int64_t base = s.base;
    if (s.rows == 0) {
        base = q0;
    } else if (lo < s.base || p1 - s.base > max_rows_) {
        base = lo;
    }
    place(s, static_cast<std::int32_t>(base), p1 - base);

    const auto D = static_cast<std::size_t>(c.head_dim);
    const auto row = static_cast<std::size_t>(q0 - s.base);
    std::vector<float*> k(s.k.size()), v(s.v.size());
    for (std::size_t l = 0; l < s.k.size(); ++l) {
        k[l] = s.k[l].data() + row * D;
        v[l] = s.v[l].data() + row;  // V is stored transposed
    }
    model_->context_kv(taps.data() + static_cast<std::size_t>(q0 - p0) * static_cast<std::size_t>(width), p1 - q0,
                       static_cast<std::int32_t>(q0), k, v, s.capacity);
    std::fill(s.valid.begin() + static_cast<std::ptrdiff_t>(row), s.valid.begin() + (p1 - s.base), 1);
}

void DSparkDrafter::release(std::uint64_t request_id) {
    requests_.erase(request_id);
}

void DSparkDrafter::propose(std::uint64_t request_id, std::int32_t sample_index, std::span<const std::int32_t> tokens,
                            std::int32_t max_drafts, std::vector<std::int32_t>& drafts,
                            std::vector<float>& draft_probs) {
    drafts.clear();
    draft_probs.clear();
    const DSparkConfig& c = model_->config();
    if (max_drafts <= 0 || tokens.empty()) return;
    MSA_CHECK(tokens.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - c.block_size),
              "DSpark propose: sequence too long");
    const auto n = static_cast<std::int32_t>(tokens.size() - 1);
    const std::int32_t anchor = tokens.back();
    MSA_CHECK(anchor >= 0 && anchor < c.vocab_size, "DSpark propose: token {} is outside the vocabulary of {}", anchor,
              c.vocab_size);
    const int rows = std::min<int>(max_drafts, c.block_size);

    Sequence* own = nullptr;
    if (auto r = requests_.find(request_id); r != requests_.end()) {
        if (auto s = r->second.find(sample_index); s != r->second.end()) own = &s->second;
    }
    if (own != nullptr) truncate(*own, n);  // rows at >= n were computed for rejected drafts

    const std::size_t layers = static_cast<std::size_t>(c.num_hidden_layers);
    DSparkContext ctx;
    ctx.layers.resize(layers);
    if (own != nullptr && own->rows > 0) {
        ctx.first_position = own->base;
        ctx.count = own->rows;
        ctx.head_stride = own->capacity;
        ctx.valid = own->valid.data();
        for (std::size_t l = 0; l < layers; ++l) ctx.layers[l] = {own->k[l].data(), own->v[l].data()};
    }

    // Samples share the prompt: positions this sample never observed may come from sample 0 where both sequences
    // agree on every token up to that position.
    std::vector<std::vector<float>> merged_k, merged_v;
    std::vector<std::uint8_t> merged_valid;
    const Sequence* first = sample_index != 0 ? find(request_id, 0) : nullptr;
    if (first != nullptr && first->rows > 0) {
        std::int64_t same = 0;  // tokens[0, same) agree with sample 0's (unknown ones count as agreeing)
        const std::int64_t limit = std::min<std::int64_t>(n, static_cast<std::int64_t>(first->history.size()));
        while (same < limit && (first->history[same] < 0 || first->history[same] == tokens[same])) ++same;
        const std::int64_t lo = std::max<std::int64_t>(0, std::int64_t{n} - c.sliding_window);
        const auto held = [](const Sequence* s, std::int64_t p) {
            return s != nullptr && p >= s->base && p < s->base + s->rows && s->valid[p - s->base] != 0;
        };
        bool useful = false;
        for (std::int64_t p = std::max(lo, std::int64_t{first->base}); p < std::min<std::int64_t>(same, n) && !useful;
             ++p) {
            useful = held(first, p) && !held(own, p);
        }
        if (useful) {
            const auto heads = static_cast<std::size_t>(c.num_key_value_heads);
            const auto D = static_cast<std::size_t>(c.head_dim);
            const auto count = static_cast<std::size_t>(n - lo);
            merged_k.assign(layers, std::vector<float>(heads * count * D));
            merged_v.assign(layers, std::vector<float>(heads * count * D));
            merged_valid.assign(count, 0);
            for (std::size_t i = 0; i < count; ++i) {
                const std::int64_t p = lo + static_cast<std::int64_t>(i);
                const Sequence* from = held(own, p) ? own : (p < same && held(first, p) ? first : nullptr);
                if (from == nullptr) continue;
                const auto r = static_cast<std::size_t>(p - from->base);
                const auto cap = static_cast<std::size_t>(from->capacity);
                for (std::size_t l = 0; l < layers; ++l) {
                    for (std::size_t h = 0; h < heads; ++h) {
                        std::copy_n(from->k[l].data() + (h * cap + r) * D, D, merged_k[l].data() + (h * count + i) * D);
                        for (std::size_t d = 0; d < D; ++d) {
                            merged_v[l][(h * D + d) * count + i] = from->v[l][(h * D + d) * cap + r];
                        }
                    }
                }
                merged_valid[i] = 1;
            }
            ctx.first_position = static_cast<std::int32_t>(lo);
            ctx.count = static_cast<std::int64_t>(count);
            ctx.head_stride = ctx.count;
            ctx.valid = merged_valid.data();
            for (std::size_t l = 0; l < layers; ++l) ctx.layers[l] = {merged_k[l].data(), merged_v[l].data()};
        }
    }

    std::vector<float> u(static_cast<std::size_t>(rows) * static_cast<std::size_t>(c.vocab_size));
    model_->block_logits(anchor, n, ctx, rows, u.data());
    model_->greedy_drafts(u.data(), anchor, rows, drafts);
}

std::unique_ptr<DSparkDrafter> load_dspark_drafter(const std::string& drafter_dir, const DSparkLoadOptions& options) {
    return std::make_unique<DSparkDrafter>(DSparkModel::load(drafter_dir, options));
}

}  // namespace msa
