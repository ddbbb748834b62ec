#include "engine/chi_square.h"

#include <cmath>
#include <limits>

namespace msa::testing {

double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
    if (x < a + 1) {
        // Series for the lower function P(a, x) = x^a e^-x / Gamma(a) * sum x^n / (a (a+1) ... (a+n)).
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 100000; ++n) {
            term *= x / (a + n);
            sum += term;
            if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
        }
        return 1.0 - sum * std::exp(log_prefix);
    }
    // Continued fraction for Q(a, x) (modified Lentz).
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 100000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1) < 1e-15) break;
    }
    return std::exp(log_prefix) * h;
}

ChiSquare chi_square(const std::vector<std::int64_t>& observed, const std::vector<double>& expected_probs) {
    std::int64_t total = 0;
    for (auto o : observed) total += o;
    ChiSquare result;
    double pooled_expected = 0;
    std::int64_t pooled_observed = 0;
    int bins = 0;
    for (std::size_t i = 0; i < observed.size(); ++i) {
        const double e = expected_probs[i] * static_cast<double>(total);
        if (expected_probs[i] == 0.0) {
            if (observed[i] > 0) {
                result.statistic = std::numeric_limits<double>::infinity();
                result.p_value = 0.0;
                return result;
            }
            continue;
        }
        if (e < 5.0) {
            pooled_expected += e;
            pooled_observed += observed[i];
            continue;
        }
        const double diff = static_cast<double>(observed[i]) - e;
        result.statistic += diff * diff / e;
        ++bins;
    }
    if (pooled_expected > 0) {
        const double diff = static_cast<double>(pooled_observed) - pooled_expected;
        result.statistic += diff * diff / pooled_expected;
        ++bins;
    }
    result.degrees_of_freedom = bins - 1;
    result.p_value =
        result.degrees_of_freedom > 0 ? gamma_q(result.degrees_of_freedom / 2.0, result.statistic / 2.0) : 1.0;
    return result;
}

}  // namespace msa::testing
