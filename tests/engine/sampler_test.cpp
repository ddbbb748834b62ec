// Sampler: statistical tests against distributions computed independently here (double precision, full sort),
// plus exact checks of penalties, bias, min_tokens, greedy ties, logprobs and seeding.
#include "engine/sampler.h"
#include "engine/chi_square.h"
#include "engine/request_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace msa {
namespace {

using testing::chi_square;

// Logits with a spread of magnitudes and a few exact ties.
std::vector<float> test_logits(int vocab, std::uint64_t seed) {
    std::vector<float> l(vocab);
    for (int i = 0; i < vocab; ++i) {
        l[i] = static_cast<float>(RequestRng(seed, 0).uniform(i) * 6.0 - 3.0);
    }
    l[vocab / 2] = l[vocab / 3];  // a tie
    return l;
}

// The intended distribution, written independently of the sampler: softmax(l / T), then min-p, top-k, top-p on
// a full sort of the vocabulary, renormalising after each filter.
std::vector<double> expected_distribution(const std::vector<float>& l, double temperature, int top_k, double top_p,
                                          double min_p) {
    const int vocab = static_cast<int>(l.size());
    std::vector<double> p(vocab);
    const double m = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (int i = 0; i < vocab; ++i) z += p[i] = std::exp((l[i] - m) / temperature);
    for (double& v : p) v /= z;
    std::vector<int> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    std::vector<bool> keep(vocab, true);
    const double pmax = p[order[0]];
    for (int i = 0; i < vocab; ++i) keep[i] = p[i] >= min_p * pmax;
    if (top_k > 0) {
        int kept = 0;
        for (int i : order) {
            if (keep[i] && ++kept > top_k) keep[i] = false;
        }
    }
    auto renormalise = [&] {
        double s = 0;
        for (int i = 0; i < vocab; ++i) s += keep[i] ? p[i] : 0;
        for (int i = 0; i < vocab; ++i) p[i] = keep[i] ? p[i] / s : 0;
    };
    renormalise();
    if (top_p < 1.0) {
        double cumulative = 0;
        for (int i : order) {
            if (!keep[i]) continue;
            if (cumulative >= top_p) keep[i] = false;
            cumulative += p[i];
        }
        renormalise();
    }
    return p;
}

std::vector<std::int64_t> sample_counts(const std::vector<float>& logits, const SamplingParams& params, int draws,
                                        std::uint64_t seed) {
    Sampler sampler(SamplerConfig{static_cast<std::int32_t>(logits.size()), {}, LogprobsMode::raw});
    TokenHistory history;
    RequestRng rng(seed, 0);
    std::vector<std::int64_t> counts(logits.size(), 0);
    for (int i = 0; i < draws; ++i) ++counts[sampler.sample(logits, params, history, rng, i).token];
    return counts;
}

struct FilterCase {
    double temperature;
    int top_k;
    double top_p;
    double min_p;
};

class SamplerDistributionTest : public ::testing::TestWithParam<FilterCase> {};

TEST_P(SamplerDistributionTest, FrequenciesMatchTheIntendedDistribution) {
    const FilterCase c = GetParam();
    const std::vector<float> logits = test_logits(40, 17);
    SamplingParams params;
    params.temperature = static_cast<float>(c.temperature);
    params.top_k = c.top_k;
    params.top_p = static_cast<float>(c.top_p);
    params.min_p = static_cast<float>(c.min_p);
    const auto counts = sample_counts(logits, params, 200000, 4242);
    const auto expected = expected_distribution(logits, c.temperature, c.top_k, c.top_p, c.min_p);
    const auto result = chi_square(counts, expected);
    // A fixed seed makes this deterministic; the threshold is the usual 0.1% significance level.
    EXPECT_GT(result.p_value, 1e-3) << "chi2 " << result.statistic << " df " << result.degrees_of_freedom;
    // Filtered tokens never appear.
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (expected[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Filters, SamplerDistributionTest,
                         ::testing::Values(FilterCase{1.0, 0, 1.0, 0.0}, FilterCase{0.6, 0, 1.0, 0.0},
                                           FilterCase{1.7, 0, 1.0, 0.0}, FilterCase{1.0, 5, 1.0, 0.0},
                                           FilterCase{1.0, 0, 0.7, 0.0}, FilterCase{1.0, 0, 1.0, 0.2},
                                           FilterCase{0.8, 12, 0.9, 0.0}, FilterCase{1.3, 20, 0.8, 0.05},
                                           FilterCase{0.7, 0, 0.95, 0.1}, FilterCase{1.0, 1, 1.0, 0.0},
                                           FilterCase{2.0, 30, 0.5, 0.3}));

TEST(SamplerDistribution, ChiSquareDetectsAWrongDistribution) {
    // The same test must fail when the sampler's distribution differs from the expectation (test power).
    const std::vector<float> logits = test_logits(40, 17);
    SamplingParams params;
    params.temperature = 1.0f;
    const auto counts = sample_counts(logits, params, 200000, 4242);
    EXPECT_LT(chi_square(counts, expected_distribution(logits, 0.9, 0, 1.0, 0.0)).p_value, 1e-6);
    EXPECT_LT(chi_square(counts, expected_distribution(logits, 1.0, 0, 0.97, 0.0)).p_value, 1e-6);
}

TEST(SamplerDistribution, LargeVocabularyTopP) {
    // Flat logits put hundreds of tokens in the nucleus (the bisection over nth_element, not just a short head).
    std::vector<float> logits(2000);
    for (int i = 0; i < 2000; ++i) logits[i] = static_cast<float>(RequestRng(3, 0).uniform(i) * 0.5);
    SamplingParams params;
    params.top_p = 0.5f;
    const auto counts = sample_counts(logits, params, 30000, 99);
    const auto expected = expected_distribution(logits, 1.0, 0, 0.5, 0.0);
    int kept = 0;
    for (double e : expected) kept += e > 0;
    EXPECT_GT(kept, 500);
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (expected[i] == 0.0) {
            ASSERT_EQ(counts[i], 0) << "token " << i << " is outside the top-p set";
        }
    }
    // 30k draws over ~1000 tokens: pool into 30 bins (in id order) to keep expected counts large.
    std::vector<std::int64_t> obs(30, 0);
    std::vector<double> exp(30, 0.0);
    int bin = 0, in_bin = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (expected[i] == 0.0) continue;
        obs[bin] += counts[i];
        exp[bin] += expected[i];
        if (++in_bin == kept / 30 + 1) {
            ++bin;
            in_bin = 0;
        }
    }
    EXPECT_GT(chi_square(obs, exp).p_value, 1e-3);
}

TEST(Sampler, GreedyTakesTheArgMaxWithTiesToTheLowestId) {
    Sampler sampler(SamplerConfig{6, {}, LogprobsMode::raw});
    SamplingParams params;
    params.temperature = 0.0f;
    TokenHistory history;
    EXPECT_EQ(sampler.sample(std::vector<float>{0, 3, 1, 3, -1, 2}, params, history, {}, 0).token, 1);
    params.temperature = 1e-6f;  // below vLLM's epsilon: greedy too
    EXPECT_EQ(sampler.sample(std::vector<float>{0, 3, 1, 3, -1, 2}, params, history, {}, 0).token, 1);
}

TEST(Sampler, NanLogitsAreNeverSampled) {
    Sampler sampler(SamplerConfig{4, {}, LogprobsMode::raw});
    SamplingParams params;
    TokenHistory history;
    const float nan = std::nanf("");
    for (int i = 0; i < 200; ++i) {
        const auto t = sampler.sample(std::vector<float>{nan, 0.0f, nan, 0.5f}, params, history, RequestRng(1, 0), i);
        EXPECT_TRUE(t.token == 1 || t.token == 3);
    }
}

TEST(Sampler, PenaltiesAndBiasFollowVllmSemantics) {
    const int vocab = 12;
    const std::vector<float> l = {0.5f, -1.0f, 2.0f, 1.5f, -0.5f, 0.8f, 0.1f, -2.0f, 1.0f, 0.3f, -0.2f, 0.0f};
    const std::vector<std::int32_t> prompt = {3, 5, 5};
    const std::vector<std::int32_t> outputs = {5, 7, 7, 2};
    SamplingParams params;
    params.repetition_penalty = 1.3f;
    params.frequency_penalty = 0.4f;
    params.presence_penalty = 0.6f;
    params.logit_bias = {{7, 1.5f}, {9, -2.0f}};
    TokenHistory history(prompt, true);
    for (auto t : outputs) history.add_output(t);

    // Expected: bias, then repetition over prompt and output tokens, then frequency/presence over output counts.
    std::vector<double> e(l.begin(), l.end());
    e[7] += 1.5;
    e[9] -= 2.0;
    for (int t : {2, 3, 5, 7}) e[t] = e[t] > 0 ? e[t] / 1.3 : e[t] * 1.3;
    e[5] -= 0.4 * 1 + 0.6;
    e[7] -= 0.4 * 2 + 0.6;
    e[2] -= 0.4 * 1 + 0.6;
    double z = 0;
    for (double& v : e) z += v = std::exp(v);

    Sampler sampler(SamplerConfig{vocab, {}, LogprobsMode::raw});
    std::vector<float> probs;
    sampler.probabilities(l, params, history, probs);
    for (int i = 0; i < vocab; ++i) EXPECT_NEAR(probs[i], e[i] / z, 1e-6) << "token " << i;
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUnlessIgnoreEos) {
    Sampler sampler(SamplerConfig{5, {4}, LogprobsMode::raw});
    const std::vector<float> l = {0, 0, 0, 9, 9};  // tokens 3 (a stop id) and 4 (EOS) dominate
    SamplingParams params;
    params.temperature = 0.0f;
    params.min_tokens = 2;
    params.stop_token_ids = {3};
    TokenHistory history;
    EXPECT_EQ(sampler.sample(l, params, history, {}, 0).token, 0);
    history.add_output(0);
    EXPECT_EQ(sampler.sample(l, params, history, {}, 1).token, 0);
    history.add_output(0);
    EXPECT_EQ(sampler.sample(l, params, history, {}, 2).token, 3);  // min_tokens reached
    params.ignore_eos = true;
    TokenHistory fresh;
    EXPECT_EQ(sampler.sample(l, params, fresh, {}, 0).token, 4);  // EOS is an ordinary token then
}

TEST(Sampler, RawLogprobsAreTheLogSoftmaxOfTheModelLogits) {
    const std::vector<float> l = test_logits(30, 5);
    Sampler sampler(SamplerConfig{30, {}, LogprobsMode::raw});
    SamplingParams params;
    params.temperature = 0.5f;
    params.top_k = 3;
    params.logprobs = 4;
    TokenHistory history;
    const SampledToken s = sampler.sample(l, params, history, RequestRng(8, 0), 0);
    double z = 0;
    for (float v : l) z += std::exp(static_cast<double>(v));
    EXPECT_NEAR(s.logprob, l[s.token] - std::log(z), 1e-5);
    ASSERT_EQ(s.top_logprobs.size(), 4u);
    std::vector<int> order(30);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(s.top_logprobs[i].token, order[i]);
        EXPECT_NEAR(s.top_logprobs[i].logprob, l[order[i]] - std::log(z), 1e-5);
    }
    // describe() reports the same for the same token.
    const SampledToken d = sampler.describe(l, params, history, s.token);
    EXPECT_EQ(d.logprob, s.logprob);
    EXPECT_EQ(d.top_logprobs.size(), s.top_logprobs.size());
}

TEST(Sampler, ProcessedLogprobsDescribeTheSampledDistribution) {
    const std::vector<float> l = test_logits(30, 5);
    Sampler sampler(SamplerConfig{30, {}, LogprobsMode::processed});
    SamplingParams params;
    params.temperature = 0.5f;
    params.top_k = 3;
    params.logprobs = 5;
    TokenHistory history;
    const SampledToken s = sampler.sample(l, params, history, RequestRng(8, 0), 0);
    const auto expected = expected_distribution(l, 0.5, 3, 1.0, 0.0);
    EXPECT_NEAR(s.logprob, std::log(expected[s.token]), 1e-5);
    ASSERT_EQ(s.top_logprobs.size(), 3u);  // only the three tokens top-k keeps have a finite logprob
    double total = 0;
    for (const auto& t : s.top_logprobs) {
        EXPECT_NEAR(t.logprob, std::log(expected[t.token]), 1e-5);
        total += std::exp(t.logprob);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(Sampler, SameSeedSameTokensWhateverElseIsSampled) {
    const int vocab = 50;
    Sampler sampler(SamplerConfig{vocab, {}, LogprobsMode::raw});
    SamplingParams params;
    params.temperature = 1.0f;
    auto run = [&](bool interleave) {
        std::vector<std::int32_t> out;
        TokenHistory history, other_history;
        RequestRng rng(777, 0), other(778, 0);
        for (int pos = 0; pos < 64; ++pos) {
            if (interleave) sampler.sample(test_logits(vocab, 1000 + pos), params, other_history, other, pos * 3);
            out.push_back(sampler.sample(test_logits(vocab, pos), params, history, rng, pos).token);
        }
        return out;
    };
    const auto alone = run(false);
    EXPECT_EQ(alone, run(true));
    // A different stream (another of n samples) gives a different sequence.
    TokenHistory history;
    std::vector<std::int32_t> other_stream;
    for (int pos = 0; pos < 64; ++pos) {
        other_stream.push_back(sampler.sample(test_logits(vocab, pos), params, history, RequestRng(777, 1), pos).token);
    }
    EXPECT_NE(alone, other_stream);
}

TEST(Sampler, TokenHistoryCountsAndForgets) {
    TokenHistory h(std::vector<std::int32_t>{4, 2, 4}, true);
    EXPECT_TRUE(h.prompt_contains(4));
    EXPECT_FALSE(h.prompt_contains(3));
    h.add_output(3);
    h.add_output(3);
    h.add_output(1);
    EXPECT_EQ(h.num_output(), 3);
    h.remove_outputs(std::vector<std::int32_t>{3, 1});
    EXPECT_EQ(h.num_output(), 1);
    EXPECT_EQ(h.output_counts().at(3), 1);
    EXPECT_EQ(h.output_counts().count(1), 0u);
    EXPECT_THROW(h.remove_outputs(std::vector<std::int32_t>{9}), Error);
}

TEST(SamplingParams, ValidationNamesTheField) {
    auto field_of = [](SamplingParams p) -> std::string {
        try {
            validate_sampling_params(p, 100);
        } catch (const RequestError& e) {
            return e.param();
        }
        return "";
    };
    SamplingParams ok;
    EXPECT_EQ(field_of(ok), "");
    SamplingParams p;
    p.temperature = -1;
    EXPECT_EQ(field_of(p), "temperature");
    p = ok;
    p.top_p = 0;
    EXPECT_EQ(field_of(p), "top_p");
    p = ok;
    p.top_k = -2;
    EXPECT_EQ(field_of(p), "top_k");
    p = ok;
    p.min_p = 1.5f;
    EXPECT_EQ(field_of(p), "min_p");
    p = ok;
    p.presence_penalty = 2.5f;
    EXPECT_EQ(field_of(p), "presence_penalty");
    p = ok;
    p.repetition_penalty = 0;
    EXPECT_EQ(field_of(p), "repetition_penalty");
    p = ok;
    p.logit_bias = {{100, 1.0f}};
    EXPECT_EQ(field_of(p), "logit_bias");
    p = ok;
    p.stop = {""};
    EXPECT_EQ(field_of(p), "stop");
    p = ok;
    p.stop_token_ids = {-1};
    EXPECT_EQ(field_of(p), "stop_token_ids");
    p = ok;
    p.max_tokens = 0;
    EXPECT_EQ(field_of(p), "max_tokens");
    p = ok;
    p.max_tokens = 3;
    p.min_tokens = 4;
    EXPECT_EQ(field_of(p), "min_tokens");
    p = ok;
    p.logprobs = 21;
    EXPECT_EQ(field_of(p), "top_logprobs");
    p = ok;
    p.temperature = std::nanf("");
    EXPECT_EQ(field_of(p), "temperature");
}

TEST(ChiSquare, IncompleteGammaMatchesKnownValues) {
    // Chi-square upper tail: df 1 at 3.841 -> 0.05; df 10 at 23.209 -> 0.01; df 2 at x -> exp(-x/2).
    EXPECT_NEAR(testing::gamma_q(0.5, 3.841 / 2), 0.05, 1e-4);
    EXPECT_NEAR(testing::gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
    EXPECT_NEAR(testing::gamma_q(1.0, 7.0 / 2), std::exp(-3.5), 1e-12);
    EXPECT_NEAR(testing::gamma_q(50.0, 40.0), 0.929664933, 1e-8);  // torch.special.gammaincc(50, 40)
}

}  // namespace
}  // namespace msa
