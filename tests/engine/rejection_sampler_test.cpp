// Speculative verification is lossless: whatever the draft distribution q, the emitted tokens are distributed as
// the target p. Checked with chi-square tests on many independent verifications, with the acceptance rate against
// its closed form sum_x min(p(x), q(x)), and with a negative control.
#include "engine/rejection_sampler.h"
#include "core/error.h"
#include "engine/chi_square.h"
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace msa {
namespace {

using testing::chi_square;

constexpr int kVocab = 12;

// A random distribution with some zero entries (tokens one side cannot produce).
std::vector<float> random_distribution(std::uint64_t seed, int zero_every) {
    std::vector<float> p(kVocab);
    double sum = 0;
    for (int i = 0; i < kVocab; ++i) {
        const double u = RequestRng(seed, 0).uniform(i);
        p[i] = (zero_every > 0 && i % zero_every == 0) ? 0.0f : static_cast<float>(std::exp(3.0 * u));
        sum += p[i];
    }
    for (float& v : p) v = static_cast<float>(v / sum);
    return p;
}

std::vector<double> as_double(std::span<const float> p) {
    return std::vector<double>(p.begin(), p.end());
}

struct Rows {
    std::vector<float> target, draft;  // (k + 1) and k rows
};

Rows make_rows(int k) {
    Rows r;
    for (int i = 0; i <= k; ++i) {
        auto p = random_distribution(100 + i, i == 1 ? 5 : 0);
        r.target.insert(r.target.end(), p.begin(), p.end());
    }
    for (int i = 0; i < k; ++i) {
        auto q = random_distribution(200 + i, i == 0 ? 4 : 0);
        r.draft.insert(r.draft.end(), q.begin(), q.end());
    }
    return r;
}

TEST(RejectionSampler, OutputDistributionEqualsTheTarget) {
    const int k = 3, trials = 120000;
    const Rows rows = make_rows(k);
    std::vector<std::vector<std::int64_t>> counts(k + 1, std::vector<std::int64_t>(kVocab, 0));
    std::int64_t accepted_first = 0;
    for (int t = 0; t < trials; ++t) {
        // Drafts sampled from q with randomness independent of the verifier's.
        std::vector<std::int32_t> drafts;
        for (int i = 0; i < k; ++i) {
            drafts.push_back(Sampler::draw(std::span<const float>(rows.draft).subspan(i * kVocab, kVocab),
                                           RequestRng(31337, t).uniform(i)));
        }
        const VerifyResult r = verify_probabilistic(drafts, rows.target, rows.draft, kVocab, RequestRng(42, t), 0);
        ASSERT_EQ(r.tokens.size(), static_cast<std::size_t>(r.num_accepted) + 1);
        for (int j = 0; j < r.num_accepted; ++j) ASSERT_EQ(r.tokens[j], drafts[j]);
        // The j-th emitted token, whenever it exists, is distributed as p_j (the rows do not depend on history).
        for (std::size_t j = 0; j < r.tokens.size(); ++j) ++counts[j][r.tokens[j]];
        accepted_first += r.num_accepted >= 1;
    }
    for (int j = 0; j <= k; ++j) {
        const auto p = as_double(std::span<const float>(rows.target).subspan(j * kVocab, kVocab));
        const auto result = chi_square(counts[j], p);
        EXPECT_GT(result.p_value, 1e-3) << "position " << j << " chi2 " << result.statistic;
    }
    // Acceptance probability of the first draft: sum_x min(p(x), q(x)).
    double alpha = 0;
    for (int x = 0; x < kVocab; ++x) alpha += std::min(rows.target[x], rows.draft[x]);
    const double rate = static_cast<double>(accepted_first) / trials;
    EXPECT_NEAR(rate, alpha, 5 * std::sqrt(alpha * (1 - alpha) / trials));
}

TEST(RejectionSampler, GreedyDraftsAreOneHotProposals) {
    const int k = 2, trials = 100000;
    const Rows rows = make_rows(k);
    std::vector<std::int64_t> first(kVocab, 0);
    std::int64_t accepted = 0;
    // A greedy drafter always proposes the same tokens; token 3 has probability p0[3] under the target.
    const std::vector<std::int32_t> drafts = {3, 7};
    for (int t = 0; t < trials; ++t) {
        const VerifyResult r = verify_probabilistic(drafts, rows.target, {}, kVocab, RequestRng(5, t), 0);
        ++first[r.tokens[0]];
        accepted += r.num_accepted >= 1;
    }
    EXPECT_GT(chi_square(first, as_double(std::span<const float>(rows.target).first(kVocab))).p_value, 1e-3);
    const double alpha = rows.target[3];
    EXPECT_NEAR(static_cast<double>(accepted) / trials, alpha, 5 * std::sqrt(alpha * (1 - alpha) / trials));
}

TEST(RejectionSampler, TheTestDetectsALossyVerifier) {
    // Negative control: accepting every draft emits q instead of p, and the same chi-square test rejects it.
    const int trials = 50000;
    const Rows rows = make_rows(1);
    std::vector<std::int64_t> first(kVocab, 0);
    for (int t = 0; t < trials; ++t) {
        ++first[Sampler::draw(std::span<const float>(rows.draft).first(kVocab), RequestRng(31337, t).uniform(0))];
    }
    EXPECT_LT(chi_square(first, as_double(std::span<const float>(rows.target).first(kVocab))).p_value, 1e-9);
}

TEST(RejectionSampler, GreedyTargetAcceptsTheArgMaxPrefix) {
    // Three rows of logits over 4 tokens: arg maxes 2, 0, 3.
    const std::vector<float> logits = {0, 1, 5, 2, /**/ 7, 1, 1, 1, /**/ 0, 0, 0, 9};
    VerifyResult r = verify_greedy(std::vector<std::int32_t>{2, 0}, logits, 4);
    EXPECT_EQ(r.num_accepted, 2);
    EXPECT_EQ(r.tokens, (std::vector<std::int32_t>{2, 0, 3}));  // both accepted, bonus 3
    r = verify_greedy(std::vector<std::int32_t>{2, 1}, logits, 4);
    EXPECT_EQ(r.num_accepted, 1);
    EXPECT_EQ(r.tokens, (std::vector<std::int32_t>{2, 0}));  // correction 0 replaces the rejected 1
    r = verify_greedy(std::vector<std::int32_t>{1, 0}, logits, 4);
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_EQ(r.tokens, (std::vector<std::int32_t>{2}));
}

TEST(RejectionSampler, OneHotTargetReducesToGreedyVerification) {
    // The engine verifies greedy requests through verify_probabilistic with one-hot target rows.
    std::vector<float> p(3 * 4, 0.0f);
    p[0 * 4 + 2] = p[1 * 4 + 0] = p[2 * 4 + 3] = 1.0f;
    for (int t = 0; t < 100; ++t) {
        auto r = verify_probabilistic(std::vector<std::int32_t>{2, 1}, p, {}, 4, RequestRng(9, t), 0);
        EXPECT_EQ(r.tokens, (std::vector<std::int32_t>{2, 0}));
    }
}

TEST(RejectionSampler, RejectsMalformedInput) {
    std::vector<float> p(2 * 4, 0.25f);
    EXPECT_THROW(verify_probabilistic(std::vector<std::int32_t>{1, 2}, p, {}, 4, {}, 0), Error);  // rows missing
    EXPECT_THROW(verify_probabilistic(std::vector<std::int32_t>{9}, p, {}, 4, {}, 0), Error);     // bad token
}

}  // namespace
}  // namespace msa
