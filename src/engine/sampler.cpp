#include "engine/sampler.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace msa {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log(sum(exp(x))) over the finite entries; -inf when none is finite.

double log_sum_exp(std::span<const float> x) {
    const float m = max_value(x);
    if (m == kNegInf) return kNegInf;
    double sum = 0.0;
    for (float v : x) sum += std::exp(v - m);
    return m + std::log(sum);
}

// The k entries of `values` with the largest value (ties to the lower index), best first, in `order`. One pass
// that keeps a sorted list of the k best so far (k is small: at most kMaxLogprobs).
void top_entries(std::span<const float> values, std::int32_t k, std::vector<std::int32_t>& order) {
    order.clear();
    const auto n = static_cast<std::int32_t>(values.size());
    k = std::min(k, n);
    if (k <= 0) return;
    for (std::int32_t i = 0; i < n; ++i) {
        const float v = values[i];
        // Equal values: the earlier index stays ahead, so only a strictly larger value displaces the last entry.
        if (static_cast<std::int32_t>(order.size()) == k) {
            if (!(v > values[order.back()])) continue;
            order.pop_back();
        }
        auto pos = order.end();
        while (pos != order.begin() && v > values[*(pos - 1)]) --pos;
        order.insert(pos, i);
    }
}

}  // namespace

// ---- TokenHistory ------------------------------------------------------------------------------------------------

TokenHistory::TokenHistory(std::span<const std::int32_t> prompt, bool keep_prompt_set) {
    if (keep_prompt_set) {
        prompt_set_.assign(prompt.begin(), prompt.end());
        std::sort(prompt_set_.begin(), prompt_set_.end());
        prompt_set_.erase(std::unique(prompt_set_.begin(), prompt_set_.end()), prompt_set_.end());
    }
}

void TokenHistory::add_output(std::int32_t token) {
    ++output_counts_[token];
    ++num_output_;
}

void TokenHistory::remove_outputs(std::span<const std::int32_t> tokens) {
    for (std::int32_t t : tokens) {
        auto it = output_counts_.find(t);
        MSA_CHECK(it != output_counts_.end(), "TokenHistory::remove_outputs: token {} was never added.", t);
        if (--it->second == 0) output_counts_.erase(it);
        --num_output_;
    }
}

bool TokenHistory::prompt_contains(std::int32_t token) const {
    return std::binary_search(prompt_set_.begin(), prompt_set_.end(), token);
}

// ---- Sampler ------------------------------------------------------------------------------------------------------

float max_value(std::span<const float> values) {
    // Eight independent lanes keep the loop free of a serial dependency (the compiler vectorises it).
    float lane[8];
    std::fill(lane, lane + 8, kNegInf);
    const std::size_t n = values.size(), n8 = n / 8 * 8;
    for (std::size_t i = 0; i < n8; i += 8) {
        for (int j = 0; j < 8; ++j) lane[j] = values[i + j] > lane[j] ? values[i + j] : lane[j];
    }
    float m = kNegInf;
    for (float v : lane) m = v > m ? v : m;
    for (std::size_t i = n8; i < n; ++i) m = values[i] > m ? values[i] : m;
    return m;
}

std::int32_t argmax(std::span<const float> values) {
    if (values.empty()) return 0;
    const float m = max_value(values);
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i] == m) return static_cast<std::int32_t>(i);
    }
    return 0;  // only NaN or -inf values
}

Sampler::Sampler(SamplerConfig config) : config_(std::move(config)) {
    MSA_CHECK(config_.vocab_size > 0, "Sampler: vocab_size must be positive, got {}.", config_.vocab_size);
    work_.resize(config_.vocab_size);
    token_weight_.resize(config_.vocab_size);
}

void Sampler::process_logits(std::span<const float> logits, const SamplingParams& p, const TokenHistory& history) {
    MSA_CHECK(static_cast<std::int32_t>(logits.size()) == config_.vocab_size,
              "Sampler: got {} logits for a vocabulary of {}.", logits.size(), config_.vocab_size);
    for (std::size_t i = 0; i < logits.size(); ++i) work_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];

    if (history.num_output() < p.min_tokens) {
        if (!p.ignore_eos) {
            for (std::int32_t id : config_.eos_token_ids) work_[id] = kNegInf;
        }
        for (std::int32_t id : p.stop_token_ids) work_[id] = kNegInf;
    }
    for (const auto& [token, bias] : p.logit_bias) work_[token] += bias;

    if (p.repetition_penalty != 1.0f) {
        const float rp = p.repetition_penalty;
        auto penalise = [&](std::int32_t t) { work_[t] = work_[t] > 0.0f ? work_[t] / rp : work_[t] * rp; };
        for (std::int32_t t : history.prompt_set()) penalise(t);
        for (const auto& entry : history.output_counts()) {
            if (!history.prompt_contains(entry.first)) penalise(entry.first);
        }
    }
    if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
        for (const auto& [token, count] : history.output_counts()) {
            work_[token] -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
        }
    }
}

namespace {

// Maps a float to an unsigned key with the same order (negative values included).
std::uint32_t order_key(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace

void Sampler::keep_best(const float* score, bool by_mass, double limit) {
    // Bucket the candidates by the top 12 bits of their order key (8 buckets per octave of the score), find the
    // bucket where the limit is reached scanning from the best bucket down, and sort only that bucket. Expected
    // O(n), where a full sort or repeated nth_element over a 200k vocabulary costs milliseconds.
    constexpr int kBuckets = 4096;
    bucket_count_.assign(kBuckets, 0);
    bucket_mass_.assign(kBuckets, 0.0);
    auto bucket_of = [score](std::int32_t id) { return static_cast<int>(order_key(score[id]) >> 20); };
    for (std::int32_t id : cand_ids_) {
        const int b = bucket_of(id);
        ++bucket_count_[b];
        if (by_mass) bucket_mass_[b] += token_weight_[id];
    }
    double reached = 0.0;  // count or mass of the buckets above the boundary
    int boundary = kBuckets - 1;
    for (; boundary > 0; --boundary) {
        const double here = by_mass ? bucket_mass_[boundary] : bucket_count_[boundary];
        if (reached + here >= limit) break;
        reached += here;
    }
    // Everything above the boundary bucket is kept; inside it, the best first until the limit is reached.
    std::size_t kept = 0;
    order_.clear();
    for (std::int32_t id : cand_ids_) {
        const int b = bucket_of(id);
        if (b > boundary) {
            cand_ids_[kept++] = id;
        } else if (b == boundary) {
            order_.push_back(id);
        }
    }
    const float* l = work_.data();
    auto better = [l](std::int32_t a, std::int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
    if (by_mass) {
        std::sort(order_.begin(), order_.end(), better);
        for (std::size_t j = 0; j < order_.size() && (kept == 0 || reached < limit); ++j) {
            cand_ids_[kept++] = order_[j];
            reached += token_weight_[order_[j]];
        }
    } else {
        const auto need = std::min(order_.size(), static_cast<std::size_t>(limit - reached));
        std::nth_element(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(need), order_.end(), better);
        for (std::size_t j = 0; j < need; ++j) cand_ids_[kept++] = order_[j];
    }
    cand_ids_.resize(kept);
}

double Sampler::build_candidates(const SamplingParams& p) {
    const float* l = work_.data();
    const std::int32_t vocab = config_.vocab_size;
    const float max_logit = max_value(work_);
    cand_ids_.clear();
    cand_weights_.clear();
    if (max_logit == kNegInf) return 0.0;

    const double inv_t = 1.0 / p.temperature;
    // min-p on the temperature-scaled distribution: keep p_i >= min_p * p_max, i.e. (l_i - l_max) / T >= log(min_p).
    // Tokens below the float underflow of exp() have weight 0 whatever the filters say: they are skipped too.
    const double log_min_p = std::max(p.min_p > 0.0f ? std::log(static_cast<double>(p.min_p)) : -1e30, -103.0);
    const float min_logit = static_cast<float>(max_logit + log_min_p * p.temperature);
    for (std::int32_t i = 0; i < vocab; ++i) {
        if (l[i] >= min_logit) cand_ids_.push_back(i);
    }
    if (p.top_k > 0 && p.top_k < static_cast<std::int32_t>(cand_ids_.size())) {
        keep_best(l, /*by_mass=*/false, p.top_k);
    }
    double total = 0.0;
    const float inv_t_f = static_cast<float>(inv_t);
    for (std::int32_t i : cand_ids_) total += token_weight_[i] = std::exp((l[i] - max_logit) * inv_t_f);
    if (p.top_p < 1.0f) {
        keep_best(token_weight_.data(), /*by_mass=*/true, p.top_p * total);
        total = 0.0;
        for (std::int32_t i : cand_ids_) total += token_weight_[i];
    }
    cand_weights_.resize(cand_ids_.size());
    for (std::size_t j = 0; j < cand_ids_.size(); ++j) cand_weights_[j] = token_weight_[cand_ids_[j]];
    return total;
}

std::int32_t Sampler::draw(std::span<const float> weights, double u) {
    double total = 0.0;
    for (float w : weights) total += w;
    const double target = u * total;
    double cumulative = 0.0;
    std::int32_t last_positive = -1;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        if (weights[i] <= 0.0f) continue;
        cumulative += weights[i];
        last_positive = static_cast<std::int32_t>(i);
        if (cumulative > target) return last_positive;
    }
    return last_positive;
}

SampledToken Sampler::sample(std::span<const float> logits, const SamplingParams& p, const TokenHistory& history,
                             const RequestRng& rng, std::uint64_t position) {
    process_logits(logits, p, history);
    SampledToken out;
    double total = 0.0;
    if (!p.greedy()) total = build_candidates(p);
    if (p.greedy() || cand_ids_.empty()) {
        // Greedy, or every token masked (e.g. a logit_bias of -inf everywhere): fall back to the arg max.
        out.token = argmax(work_);
        if (work_[out.token] == kNegInf) out.token = argmax(logits);
        cand_ids_.clear();
    } else {
        out.token = cand_ids_[draw(cand_weights_, rng.uniform(position))];
    }
    if (p.logprobs) fill_logprobs(logits, p, total, out);
    return out;
}

SampledToken Sampler::describe(std::span<const float> logits, const SamplingParams& p, const TokenHistory& history,
                               std::int32_t token) {
    process_logits(logits, p, history);
    SampledToken out;
    out.token = token;
    const double total = p.greedy() ? 0.0 : build_candidates(p);
    if (p.greedy()) cand_ids_.clear();
    if (p.logprobs) fill_logprobs(logits, p, total, out);
    return out;
}

void Sampler::fill_logprobs(std::span<const float> raw_logits, const SamplingParams& p, double total,
                            SampledToken& out) {
    const std::int32_t k = *p.logprobs;
    auto from_logits = [&](std::span<const float> values) {
        const double lse = log_sum_exp(values);
        auto lp = [&](std::int32_t t) { return std::isnan(values[t]) ? kNegInf : static_cast<float>(values[t] - lse); };
        out.logprob = lp(out.token);
        top_entries(values, k, order_);
        for (std::int32_t t : order_) {
            if (float v = lp(t); v != kNegInf) out.top_logprobs.push_back({t, v});
        }
    };
    if (config_.logprobs_mode == LogprobsMode::raw) {
        // NaN logits count as -inf here too (work_ holds processed values, so sanitise a copy of the raw ones).
        raw_.resize(raw_logits.size());
        for (std::size_t i = 0; i < raw_logits.size(); ++i)
            raw_[i] = std::isnan(raw_logits[i]) ? kNegInf : raw_logits[i];
        from_logits(raw_);
    } else if (cand_ids_.empty()) {
        from_logits(work_);  // greedy: log-softmax of the processed logits (no temperature)
    } else {
        const double log_total = std::log(total);
        out.logprob = kNegInf;
        for (std::size_t j = 0; j < cand_ids_.size(); ++j) {
            if (cand_ids_[j] == out.token) out.logprob = static_cast<float>(std::log(cand_weights_[j]) - log_total);
        }
        order_.resize(cand_ids_.size());
        std::iota(order_.begin(), order_.end(), 0);
        auto better = [&](std::int32_t a, std::int32_t b) {
            return cand_weights_[a] > cand_weights_[b] ||
                   (cand_weights_[a] == cand_weights_[b] && cand_ids_[a] < cand_ids_[b]);
        };
        const std::int32_t n = std::min<std::int32_t>(k, static_cast<std::int32_t>(order_.size()));
        std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), better);
        for (std::int32_t j = 0; j < n; ++j) {
            out.top_logprobs.push_back(
                {cand_ids_[order_[j]], static_cast<float>(std::log(cand_weights_[order_[j]]) - log_total)});
        }
    }
}

void Sampler::probabilities(std::span<const float> logits, const SamplingParams& p, const TokenHistory& history,
                            std::vector<float>& probs) {
    process_logits(logits, p, history);
    probs.assign(config_.vocab_size, 0.0f);
    const double total = p.greedy() ? 0.0 : build_candidates(p);
    if (p.greedy() || cand_ids_.empty()) {
        std::int32_t t = argmax(work_);
        if (work_[t] == kNegInf) t = argmax(logits);
        probs[t] = 1.0f;
        return;
    }
    for (std::size_t j = 0; j < cand_ids_.size(); ++j) {
        probs[cand_ids_[j]] = static_cast<float>(cand_weights_[j] / total);
    }
}

}  // namespace msa
