// A small Prometheus metrics registry with the text exposition format 0.0.4: counters, gauges and histograms,
// each a family of series told apart by label values. Thread-safe: series are created under a lock and updated
// with atomics (counters, gauges) or a per-series lock (histograms). References to series stay valid for the
// registry's lifetime, so hot paths look a series up once and keep it.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace msa::server {

using LabelValues = std::vector<std::string>;

class Counter {
public:
    void inc(double amount = 1.0);
    // Mirrors a monotonic total kept elsewhere (the engine's counters), read at collection time.
    void set_total(double total) { value_.store(total, std::memory_order_relaxed); }
    double value() const { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<double> value_{0.0};
};

class Gauge {
public:
    void set(double value) { value_.store(value, std::memory_order_relaxed); }
    void inc(double amount = 1.0);
    void dec(double amount = 1.0) { inc(-amount); }
    double value() const { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<double> value_{0.0};
};

class Histogram {
public:
    explicit Histogram(const std::vector<double>& bounds) : bounds_(bounds), counts_(bounds.size() + 1, 0) {}
    void observe(double value);

    struct Snapshot {
        std::vector<std::uint64_t> cumulative;  // per upper bound, then +Inf
        double sum = 0.0;
        std::uint64_t count = 0;
    };
    Snapshot snapshot() const;

private:
    const std::vector<double>& bounds_;
    mutable std::mutex mutex_;
    std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), last = above every bound
    double sum_ = 0.0;
};

enum class MetricType { counter, gauge, histogram };

class MetricFamily {
public:
    MetricFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                 std::vector<double> bounds = {});
    const std::string& name() const { return name_; }
    MetricType type() const { return type_; }

    // The series with these label values (created on first use). Throws msa::Error when the number of values
    // differs from the number of label names, or when the family is of another type.
    Counter& counter(const LabelValues& values);
    Gauge& gauge(const LabelValues& values);
    Histogram& histogram(const LabelValues& values);

    void render(std::string& out) const;

private:
    struct Series {
        std::unique_ptr<Counter> counter;
        std::unique_ptr<Gauge> gauge;
        std::unique_ptr<Histogram> histogram;
    };
    Series& series(const LabelValues& values, MetricType type);

    std::string name_;
    std::string help_;
    MetricType type_;
    std::vector<std::string> label_names_;
    std::vector<double> bounds_;
    mutable std::mutex mutex_;
    std::map<LabelValues, Series> series_;
};

class MetricsRegistry {
public:
    // Registers a family; names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*), counters end in "_total".
    // Throws msa::Error on an invalid or duplicate name, or unsorted histogram bounds.
    MetricFamily& counter(std::string name, std::string help, std::vector<std::string> label_names);
    MetricFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names);
    MetricFamily& histogram(std::string name, std::string help, std::vector<std::string> label_names,
                            std::vector<double> bounds);

    // Runs before every render (to copy values kept elsewhere into gauges and mirrored counters).
    void on_collect(std::function<void()> hook);

    // The whole registry in Prometheus text format 0.0.4.
    std::string render() const;

private:
    MetricFamily& add(std::unique_ptr<MetricFamily> family);

    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<MetricFamily>> families_;
    std::vector<std::function<void()>> hooks_;
};

// Content-Type of the exposition.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped for the exposition format (backslash, double quote, line feed).
std::string escape_label_value(std::string_view value);
// A sample value: integers without a fraction, "+Inf", "-Inf", "NaN".
std::string format_sample_value(double value);

}  // namespace msa::server
