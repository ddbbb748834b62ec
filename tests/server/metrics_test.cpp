#include "server/metrics_registry.h"
#include "server/serving_metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace msa::server {
namespace {

using nlohmann::json;

// Runs Debian's prometheus_client parser over an exposition (tests/server/parse_metrics.py).
json parse_with_prometheus_client(const std::string& exposition) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("msa_metrics_" + std::to_string(::getpid()) + "_" +
                       std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + ".txt");
    {
        std::ofstream out(path);
        out << exposition;
    }
    const std::string command = "/usr/bin/python3 " MSA_SOURCE_DIR "/tests/server/parse_metrics.py " + path.string();
    FILE* pipe = popen(command.c_str(), "r");
    std::string output;
    char buf[4096];
    std::size_t n;
    while (pipe != nullptr && (n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
    const int status = pipe != nullptr ? pclose(pipe) : -1;
    std::filesystem::remove(path);
    EXPECT_EQ(status, 0) << "the prometheus_client parser rejected the exposition:\n" << exposition;
    return json::parse(output, nullptr, false);
}

// The value of the sample `name` with exactly `labels`, or NaN.
double sample(const json& parsed, const std::string& family, const std::string& name, const json& labels) {
    if (!parsed.contains(family)) return std::nan("");
    for (const auto& s : parsed[family]["samples"]) {
        if (s[0] == name && s[1] == labels && s[2].is_number()) return s[2].get<double>();
    }
    return std::nan("");
}

TEST(MetricsRegistry, ExpositionParsesWithPrometheusClient) {
    MetricsRegistry registry;
    auto& requests = registry.counter("test:requests_total", "Requests.\nWith a second \\ line.", {"code", "path"});
    requests.counter({"200", "/a"}).inc(3);
    requests.counter({"500", "we\"ird\\pa\nth"}).inc();
    auto& temp = registry.gauge("test_temperature", "A gauge.", {});
    temp.gauge({}).set(-1.5);
    auto& latency = registry.histogram("test_latency_seconds", "A histogram.", {"model_name"}, {0.1, 1, 10});
    auto& h = latency.histogram({"m"});
    for (const double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.observe(v);

    const json parsed = parse_with_prometheus_client(registry.render());
    ASSERT_TRUE(parsed.is_object());
    EXPECT_EQ(parsed["test:requests"]["type"], "counter");
    EXPECT_EQ(sample(parsed, "test:requests", "test:requests_total", {{"code", "200"}, {"path", "/a"}}), 3.0);
    EXPECT_EQ(sample(parsed, "test:requests", "test:requests_total", {{"code", "500"}, {"path", "we\"ird\\pa\nth"}}),
              1.0);
    EXPECT_EQ(parsed["test_temperature"]["type"], "gauge");
    EXPECT_EQ(sample(parsed, "test_temperature", "test_temperature", json::object()), -1.5);
    EXPECT_EQ(parsed["test_latency_seconds"]["type"], "histogram");
    const auto bucket = [&](const std::string& le) {
        return sample(parsed, "test_latency_seconds", "test_latency_seconds_bucket", {{"model_name", "m"}, {"le", le}});
    };
    // Cumulative counts; an observation equal to a bound falls into that bucket (le = less or equal).
    EXPECT_EQ(bucket("0.1"), 2.0);
    EXPECT_EQ(bucket("1.0"), 3.0);
    EXPECT_EQ(bucket("10.0"), 4.0);
    EXPECT_EQ(bucket("+Inf"), 5.0);
    EXPECT_EQ(sample(parsed, "test_latency_seconds", "test_latency_seconds_count", {{"model_name", "m"}}), 5.0);
    EXPECT_NEAR(sample(parsed, "test_latency_seconds", "test_latency_seconds_sum", {{"model_name", "m"}}), 55.65, 1e-9);
}

TEST(MetricsRegistry, RejectsBadNamesAndMisuse) {
    MetricsRegistry registry;
    EXPECT_THROW(registry.counter("bad name_total", "x", {}), std::exception);
    EXPECT_THROW(registry.counter("no_suffix", "x", {}), std::exception);
    EXPECT_THROW(registry.gauge("g", "x", {"bad-label"}), std::exception);
    EXPECT_THROW(registry.histogram("h", "x", {}, {1.0, 0.5}), std::exception);
    auto& g = registry.gauge("g", "x", {"a"});
    EXPECT_THROW(g.gauge({}), std::exception);
    EXPECT_THROW(g.counter({"x"}), std::exception);
    EXPECT_THROW(registry.gauge("g", "again", {}), std::exception);
}

TEST(MetricsRegistry, ConcurrentUpdatesAreNotLost) {
    MetricsRegistry registry;
    auto& c = registry.counter("c_total", "x", {}).counter({});
    auto& h = registry.histogram("h", "x", {}, {1.0}).histogram({});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) {
                c.inc();
                h.observe(0.5);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(c.value(), 40000.0);
    EXPECT_EQ(h.snapshot().count, 40000u);
}

TEST(ServingMetrics, VllmNamesWithModelLabel) {
    BackendStats stats;
    stats.num_running = 3;
    stats.num_waiting = 2;
    stats.kv_cache_usage = 0.25;
    stats.prefix_cache_queries = 1000;
    stats.prefix_cache_hits = 640;
    stats.num_preemptions = 1;
    stats.engine_generation_tokens = 9;
    stats.spec_decode_num_drafts = 10;
    stats.spec_decode_num_draft_tokens = 30;
    stats.spec_decode_num_accepted_tokens = 18;
    stats.spec_decode_accepted_per_pos = {9, 6, 3};
    ServingMetrics metrics("msa-test", [&] { return stats; });
    metrics.add_prompt_tokens(120);
    metrics.add_generation_tokens(7);
    metrics.observe_time_to_first_token(0.03);
    metrics.observe_inter_token_latency(0.004);
    metrics.record_finished({"stop", 1.2, 120, 7, RequestTimings{0.01, 0.02, 1.1}});
    metrics.record_finished({"length", 2.0, 10, 16, std::nullopt});

    const json parsed = parse_with_prometheus_client(metrics.render());
    ASSERT_TRUE(parsed.is_object());
    const json m = {{"model_name", "msa-test"}};
    EXPECT_EQ(sample(parsed, "vllm:num_requests_running", "vllm:num_requests_running", m), 3.0);
    EXPECT_EQ(sample(parsed, "vllm:num_requests_waiting", "vllm:num_requests_waiting", m), 2.0);
    EXPECT_EQ(sample(parsed, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc", m), 0.25);
    EXPECT_EQ(sample(parsed, "vllm:prompt_tokens", "vllm:prompt_tokens_total", m), 120.0);
    EXPECT_EQ(sample(parsed, "vllm:generation_tokens", "vllm:generation_tokens_total", m), 7.0);
    EXPECT_EQ(sample(parsed, "vllm:request_success", "vllm:request_success_total",
                     {{"model_name", "msa-test"}, {"finished_reason", "stop"}}),
              1.0);
    EXPECT_EQ(sample(parsed, "vllm:request_success", "vllm:request_success_total",
                     {{"model_name", "msa-test"}, {"finished_reason", "abort"}}),
              0.0);
    EXPECT_EQ(sample(parsed, "vllm:num_preemptions", "vllm:num_preemptions_total", m), 1.0);
    EXPECT_EQ(sample(parsed, "msa:engine_generation_tokens", "msa:engine_generation_tokens_total", m), 9.0);
    EXPECT_EQ(sample(parsed, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total", m), 1000.0);
    EXPECT_EQ(sample(parsed, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total", m), 640.0);
    EXPECT_EQ(sample(parsed, "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_drafts_total", m), 10.0);
    EXPECT_EQ(sample(parsed, "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_draft_tokens_total", m), 30.0);
    EXPECT_EQ(sample(parsed, "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total", m),
              18.0);
    EXPECT_EQ(sample(parsed, "vllm:spec_decode_num_accepted_tokens_per_pos",
                     "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                     {{"model_name", "msa-test"}, {"position", "1"}}),
              6.0);
    for (const std::string h : {"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                                "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                                "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"}) {
        ASSERT_TRUE(parsed.contains(h)) << h;
        EXPECT_EQ(parsed[h]["type"], "histogram") << h;
    }
    EXPECT_EQ(sample(parsed, "vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_count", m), 2.0);
    EXPECT_EQ(sample(parsed, "vllm:request_decode_time_seconds", "vllm:request_decode_time_seconds_count", m), 1.0);
    EXPECT_EQ(sample(parsed, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_sum", m), 0.03);
    // Mirrored engine counters follow the backend at the next scrape.
    stats.prefix_cache_hits = 700;
    EXPECT_EQ(sample(parse_with_prometheus_client(metrics.render()), "vllm:prefix_cache_hits",
                     "vllm:prefix_cache_hits_total", m),
              700.0);
}

}  // namespace
}  // namespace msa::server
