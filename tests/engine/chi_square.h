// Pearson's chi-square goodness-of-fit test for the statistical sampling tests.
#pragma once

#include <cstdint>
#include <vector>

namespace msa::testing {

// Upper tail probability Q(a, x) of the regularised incomplete gamma function.
double gamma_q(double a, double x);

struct ChiSquare {
    double statistic = 0;
    int degrees_of_freedom = 0;
    double p_value = 1;
};

// Compares observed counts with expected probabilities (which sum to 1 over the bins). Bins whose expected count
// is below 5 are pooled into one bin, as the approximation requires. An observation in a bin of probability 0
// gives p_value 0.
ChiSquare chi_square(const std::vector<std::int64_t>& observed, const std::vector<double>& expected_probs);

}  // namespace msa::testing
