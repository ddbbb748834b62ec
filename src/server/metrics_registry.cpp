#include "server/metrics_registry.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace msa::server {

namespace {

void atomic_add(std::atomic<double>& target, double amount) {
    double current = target.load(std::memory_order_relaxed);
    while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
    }
}

bool valid_metric_name(std::string_view name) {
    if (name.empty()) return false;
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

bool valid_label_name(std::string_view name) {
    return valid_metric_name(name) && name.find(':') == std::string_view::npos && !name.starts_with("__");
}

std::string escape_help(std::string_view help) {
    std::string out;
    for (const char c : help) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

const char* type_name(MetricType type) {
    switch (type) {
        case MetricType::counter: return "counter";
        case MetricType::gauge: return "gauge";
        case MetricType::histogram: return "histogram";
    }
    return "untyped";
}

// {a="x",b="y"} plus an optional extra label (le="...") at the end.
std::string label_set(const std::vector<std::string>& names, const LabelValues& values, std::string_view extra_name = {},
                      std::string_view extra_value = {}) {
    if (names.empty() && extra_name.empty()) return {};
    std::string out = "{";
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += ',';
        out += fmt::format("{}=\"{}\"", names[i], escape_label_value(values[i]));
    }
    if (!extra_name.empty()) {
        if (!names.empty()) out += ',';
        out += fmt::format("{}=\"{}\"", extra_name, extra_value);
    }
    out += '}';
    return out;
}

// Bucket bounds as Prometheus' own clients write them (Go float formatting: 1 -> "1.0"), so that le values
// match series written by other exporters.
std::string format_bucket_bound(double bound) {
    if (bound == std::floor(bound) && std::fabs(bound) < 1e15) return fmt::format("{}.0", static_cast<long long>(bound));
    return fmt::format("{}", bound);
}

}  // namespace

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (const char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string format_sample_value(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<long long>(value));
    return fmt::format("{}", value);
}

void Counter::inc(double amount) {
    if (amount < 0) return;  // counters only go up
    atomic_add(value_, amount);
}

void Gauge::inc(double amount) { atomic_add(value_, amount); }

void Histogram::observe(double value) {
    if (std::isnan(value)) return;
    const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    std::lock_guard lock(mutex_);
    ++counts_[bucket];
    sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
    Snapshot s;
    std::lock_guard lock(mutex_);
    std::uint64_t running = 0;
    for (const auto c : counts_) {
        running += c;
        s.cumulative.push_back(running);
    }
    s.count = running;
    s.sum = sum_;
    return s;
}

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                           std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {
    MSA_CHECK(valid_metric_name(name_), "Invalid metric name '{}'.", name_);
    for (const auto& l : label_names_) MSA_CHECK(valid_label_name(l), "Invalid label name '{}' on '{}'.", l, name_);
    if (type_ == MetricType::histogram) {
        MSA_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()) &&
                      std::adjacent_find(bounds_.begin(), bounds_.end()) == bounds_.end(),
                  "Histogram '{}' needs strictly increasing bucket bounds.", name_);
        MSA_CHECK(std::find(label_names_.begin(), label_names_.end(), "le") == label_names_.end(),
                  "Histogram '{}' may not use the label 'le'.", name_);
    }
}

MetricFamily::Series& MetricFamily::series(const LabelValues& values, MetricType type) {
    MSA_CHECK(type == type_, "Metric '{}' is a {}, not a {}.", name_, type_name(type_), type_name(type));
    MSA_CHECK(values.size() == label_names_.size(), "Metric '{}' takes {} label values, got {}.", name_,
              label_names_.size(), values.size());
    std::lock_guard lock(mutex_);
    auto [it, inserted] = series_.try_emplace(values);
    if (inserted) {
        if (type == MetricType::counter) it->second.counter = std::make_unique<Counter>();
        if (type == MetricType::gauge) it->second.gauge = std::make_unique<Gauge>();
        if (type == MetricType::histogram) it->second.histogram = std::make_unique<Histogram>(bounds_);
    }
    return it->second;
}

Counter& MetricFamily::counter(const LabelValues& values) { return *series(values, MetricType::counter).counter; }
Gauge& MetricFamily::gauge(const LabelValues& values) { return *series(values, MetricType::gauge).gauge; }
Histogram& MetricFamily::histogram(const LabelValues& values) {
    return *series(values, MetricType::histogram).histogram;
}

void MetricFamily::render(std::string& out) const {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_, type_name(type_));
    std::lock_guard lock(mutex_);
    for (const auto& [values, s] : series_) {
        if (s.counter) out += fmt::format("{}{} {}\n", name_, label_set(label_names_, values), format_sample_value(s.counter->value()));
        if (s.gauge) out += fmt::format("{}{} {}\n", name_, label_set(label_names_, values), format_sample_value(s.gauge->value()));
        if (s.histogram) {
            const auto snap = s.histogram->snapshot();
            for (std::size_t i = 0; i <= bounds_.size(); ++i) {
                const std::string le = i < bounds_.size() ? format_bucket_bound(bounds_[i]) : "+Inf";
                out += fmt::format("{}_bucket{} {}\n", name_, label_set(label_names_, values, "le", le),
                                   snap.cumulative[i]);
            }
            out += fmt::format("{}_sum{} {}\n", name_, label_set(label_names_, values), format_sample_value(snap.sum));
            out += fmt::format("{}_count{} {}\n", name_, label_set(label_names_, values), snap.count);
        }
    }
}

MetricFamily& MetricsRegistry::add(std::unique_ptr<MetricFamily> family) {
    std::lock_guard lock(mutex_);
    for (const auto& f : families_) MSA_CHECK(f->name() != family->name(), "Metric '{}' is registered twice.", f->name());
    families_.push_back(std::move(family));
    return *families_.back();
}

MetricFamily& MetricsRegistry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
    MSA_CHECK(name.ends_with("_total"), "Counter '{}' must end in _total.", name);
    return add(std::make_unique<MetricFamily>(std::move(name), std::move(help), MetricType::counter,
                                              std::move(label_names)));
}

MetricFamily& MetricsRegistry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
    return add(
        std::make_unique<MetricFamily>(std::move(name), std::move(help), MetricType::gauge, std::move(label_names)));
}

MetricFamily& MetricsRegistry::histogram(std::string name, std::string help, std::vector<std::string> label_names,
                                         std::vector<double> bounds) {
    return add(std::make_unique<MetricFamily>(std::move(name), std::move(help), MetricType::histogram,
                                              std::move(label_names), std::move(bounds)));
}

void MetricsRegistry::on_collect(std::function<void()> hook) {
    std::lock_guard lock(mutex_);
    hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::render() const {
    std::vector<std::function<void()>> hooks;
    {
        std::lock_guard lock(mutex_);
        hooks = hooks_;
    }
    for (const auto& hook : hooks) hook();
    std::string out;
    std::lock_guard lock(mutex_);
    for (const auto& f : families_) f->render(out);
    return out;
}

}  // namespace msa::server
