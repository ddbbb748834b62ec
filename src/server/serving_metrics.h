// The serving metrics of /metrics, under vLLM's names (api.md section 7) so that existing dashboards and AIPerf
// read them unchanged. Every series carries the label model_name. Request-level figures (tokens, latencies,
// finish reasons) are recorded by the handlers as requests progress; engine-level ones (queue depth, KV usage,
// prefix cache, preemptions, speculative decoding) are copied from the backend's stats at every scrape.
#pragma once

#include "server/metrics_registry.h"
#include "server/serving_backend.h"

#include <functional>
#include <string>

namespace msa::server {

class ServingMetrics {
public:
    // `stats` is called at every scrape (may be empty in tests).
    ServingMetrics(std::string model_name, std::function<BackendStats()> stats);

    void add_prompt_tokens(std::int64_t n) { prompt_tokens_.inc(static_cast<double>(n)); }
    void add_generation_tokens(std::int64_t n) { generation_tokens_.inc(static_cast<double>(n)); }
    void observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
    void observe_inter_token_latency(double seconds) { itl_.observe(seconds); }

    struct FinishedRequest {
        std::string finish_reason;           // stop, length, abort, error
        double e2e_seconds = 0.0;
        std::int64_t prompt_tokens = 0;
        std::int64_t generation_tokens = 0;
        std::optional<RequestTimings> timings;
    };
    void record_finished(const FinishedRequest& request);
    // An HTTP request answered (any route).
    void record_http(const std::string& route, int status);

    std::string render() const { return registry_.render(); }
    MetricsRegistry& registry() { return registry_; }

private:
    std::string model_;
    MetricsRegistry registry_;
    Counter& prompt_tokens_;
    Counter& generation_tokens_;
    Histogram& ttft_;
    Histogram& itl_;
    MetricFamily& request_success_;
    Histogram& e2e_;
    Histogram& queue_time_;
    Histogram& prefill_time_;
    Histogram& decode_time_;
    Histogram& request_prompt_tokens_;
    Histogram& request_generation_tokens_;
    MetricFamily& http_requests_;
};

}  // namespace msa::server
