// A small Prometheus registry: counters, gauges and histograms, each a family of
// children told apart by their labels, rendered in the text exposition format 0.0.4:
//
//   # HELP troupe:prompt_tokens_total Number of prefill tokens processed.
//   # TYPE troupe:prompt_tokens_total counter
//   troupe:prompt_tokens_total{model_name="tiny"} 42.0
//   # HELP troupe:e2e_request_latency_seconds ...
//   # TYPE troupe:e2e_request_latency_seconds histogram
//   troupe:e2e_request_latency_seconds_bucket{model_name="tiny",le="0.3"} 1.0
//   ...                                                     le="+Inf"} 2.0   (cumulative)
//   troupe:e2e_request_latency_seconds_sum{model_name="tiny"} 0.9
//   troupe:e2e_request_latency_seconds_count{model_name="tiny"} 2.0
//
// Counter names get "_total" appended, as Python's prometheus_client (hence vLLM) does,
// so "troupe:prompt_tokens" is exposed as troupe:prompt_tokens_total. Values print as
// prometheus_client prints them ("1.0", "0.25", "+Inf").
//
// Updates are thread-safe (atomics; a mutex per histogram); references returned by the
// registry stay valid for its lifetime.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace troupe::net::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;  // name -> value, in order

class Counter {
 public:
  void inc(double v = 1.0);  // v >= 0
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v); }
  void inc(double v = 1.0) { value_.fetch_add(v); }
  void dec(double v = 1.0) { value_.fetch_sub(v); }
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, strictly increasing
  void observe(double v);                          // counted in every bucket with v <= le
  // Observations counted elsewhere: per_bucket[i] more in bucket i ([bounds + 1], not
  // cumulative; a shorter span adds nothing to the rest), with their sum.
  void add(std::span<const int64_t> per_bucket, double sum);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // [bounds + 1]; the last is +Inf = count
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // [bounds + 1] per bucket, not cumulative
  double sum_ = 0.0;
};

class Registry {
 public:
  Registry();
  ~Registry();

  // The child of family `name` with these labels, created on first use. A name keeps
  // its type, help and (for histograms) bounds; reusing it differently throws
  // troupe::Error, as do invalid metric or label names.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       const std::vector<double>& bounds, const Labels& labels = {});

  // Every family in registration order, children in label order.
  std::string render() const;

 private:
  struct Family;
  Family& family(const std::string& name, const std::string& help, int type,
                 const std::vector<double>& bounds);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;
};

// "1.0", "0.25", "1e-05", "+Inf", "NaN": prometheus_client's float formatting.
std::string format_value(double v);
// A label value with \, " and newline escaped.
std::string escape_label_value(const std::string& v);

}  // namespace troupe::net::metrics
