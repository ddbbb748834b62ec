// A fixed-bucket histogram in the Prometheus model (upper bounds, one +Inf bucket, a sum and a count), fed by the
// engine thread and copied out in EngineStats for /metrics.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace msa {

class Histogram {
public:
    Histogram() = default;
    explicit Histogram(std::vector<double> upper_bounds);

    void observe(double value);

    // bounds()[i] is the inclusive upper bound of counts()[i]; counts() has one more entry, for +Inf. Counts are
    // per bucket, not cumulative (Prometheus exposition wants cumulative: sum them up).
    const std::vector<double>& bounds() const { return bounds_; }
    const std::vector<std::int64_t>& counts() const { return counts_; }
    double sum() const { return sum_; }
    std::int64_t count() const { return count_; }

private:
    std::vector<double> bounds_;
    std::vector<std::int64_t> counts_;
    double sum_ = 0.0;
    std::int64_t count_ = 0;
};

// The bucket bounds vLLM uses for its request timing histograms (seconds), so that dashboards built for vLLM show
// the same resolution.
std::vector<double> ttft_buckets();
std::vector<double> inter_token_latency_buckets();
std::vector<double> request_latency_buckets();  // e2e, queue, prefill, decode

}  // namespace msa
