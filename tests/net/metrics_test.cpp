// Prometheus text exposition of the registry and of troupe's serving metric set,
// checked line by line against hand-written text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/check.h"
#include "net/metrics/registry.h"
#include "net/metrics/serving_metrics.h"

namespace troupe::net::metrics {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines(text))
    if (l == line) return true;
  return false;
}

TEST(Metrics, FormatsValuesAsPrometheusClient) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},           {1.0, "1.0"},
      {42.0, "42.0"},         {0.25, "0.25"},
      {0.001, "0.001"},       {1e-05, "1e-05"},
      {2.5e-05, "2.5e-05"},   {-3.5, "-3.5"},
      {123456.0, "123456.0"}, {1234567.0, "1.234567e+06"},
      {1e6, "1e+06"},         {2560.0, "2560.0"},
      {INFINITY, "+Inf"},     {-INFINITY, "-Inf"},
      {NAN, "NaN"},           {0.1, "0.1"},
      {1e16, "1e+16"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(format_value(v), want) << v;
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, CounterGaugeHistogramExposition) {
  Registry r;
  Counter& a = r.counter("app:requests", "Requests served.", {{"code", "200"}});
  Counter& b = r.counter("app:requests_total", "Requests served.", {{"code", "404"}});
  a.inc();
  a.inc(2);
  b.inc(0.5);
  EXPECT_EQ(&r.counter("app:requests", "Requests served.", {{"code", "200"}}), &a);
  Gauge& g = r.gauge("app:queue", "Queue length.\nSecond line \\ here.");
  g.set(5);
  g.dec(2);
  Histogram& h = r.histogram("app:latency_seconds", "Latency.", {0.1, 1.0}, {{"m", "x\"y"}});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.observe(v);
  const std::vector<std::string> want = {
      "# HELP app:requests_total Requests served.",
      "# TYPE app:requests_total counter",
      "app:requests_total{code=\"200\"} 3.0",
      "app:requests_total{code=\"404\"} 0.5",
      "# HELP app:queue Queue length.\\nSecond line \\\\ here.",
      "# TYPE app:queue gauge",
      "app:queue 3.0",
      "# HELP app:latency_seconds Latency.",
      "# TYPE app:latency_seconds histogram",
      "app:latency_seconds_bucket{m=\"x\\\"y\",le=\"0.1\"} 2.0",  // 0.1 <= le 0.1
      "app:latency_seconds_bucket{m=\"x\\\"y\",le=\"1.0\"} 3.0",
      "app:latency_seconds_bucket{m=\"x\\\"y\",le=\"+Inf\"} 4.0",
      "app:latency_seconds_sum{m=\"x\\\"y\"} 3.65",
      "app:latency_seconds_count{m=\"x\\\"y\"} 4.0",
  };
  EXPECT_EQ(lines(r.render()), want) << r.render();
}

TEST(Metrics, RejectsMisuse) {
  Registry r;
  r.counter("x", "help");
  EXPECT_THROW(r.gauge("x_total", "help"), Error);  // the counter's exposed name
  r.histogram("h", "help", {1, 2});
  EXPECT_THROW(r.histogram("h", "help", {1, 3}), Error);
  EXPECT_THROW(r.counter("1bad", "help"), Error);
  EXPECT_THROW(r.counter("bad-name", "help"), Error);
  EXPECT_THROW(r.counter("ok", "help", {{"bad-label", "v"}}), Error);
  EXPECT_THROW(r.histogram("h2", "help", {1}, {{"le", "v"}}), Error);
  EXPECT_THROW(r.histogram("h3", "help", {2, 1}), Error);
  EXPECT_THROW(r.counter("x", "help").inc(-1), Error);
}

TEST(Metrics, ServingMetricSet) {
  Registry r;
  ServingMetrics m(r, "tiny");
  const std::string fresh = r.render();
  // Every name of the issue, with vLLM's suffixes and types.
  for (const char* line : {
           "# TYPE troupe:num_requests_running gauge",
           "# TYPE troupe:num_requests_waiting gauge",
           "# TYPE troupe:kv_cache_usage_perc gauge",
           "# TYPE troupe:prefix_cache_queries_total counter",
           "# TYPE troupe:prefix_cache_hits_total counter",
           "# TYPE troupe:prefix_cache_snapshot_hits_total counter",
           "# TYPE troupe:prefix_cache_replay_hits_total counter",
           "# TYPE troupe:prefix_cache_replay_tokens_total counter",
           "# TYPE troupe:prompt_tokens_total counter",
           "# TYPE troupe:generation_tokens_total counter",
           "# TYPE troupe:num_preemptions_total counter",
           "# TYPE troupe:rank_busy_seconds_total counter",
           "# TYPE troupe:request_success_total counter",
           "# TYPE troupe:time_to_first_token_seconds histogram",
           "# TYPE troupe:inter_token_latency_seconds histogram",
           "# TYPE troupe:e2e_request_latency_seconds histogram",
           "# TYPE troupe:request_queue_time_seconds histogram",
           "# TYPE troupe:num_requests_admitted_per_step histogram",
           "# TYPE troupe:scheduler_step_time_seconds histogram",
           "troupe:request_success_total{finished_reason=\"abort\",model_name=\"tiny\"} 0.0",
           "troupe:request_success_total{finished_reason=\"stop\",model_name=\"tiny\"} 0.0",
       })
    EXPECT_TRUE(has_line(fresh, line)) << line;

  m.record_step({.num_running = 3,
                 .num_waiting = 2,
                 .kv_cache_usage = 0.25,
                 .num_admitted = 2,
                 .num_preemptions = 1,
                 .prefix_queries = 100,
                 .prefix_hits = 64,
                 .step_seconds = 0.0004});
  m.record_first_token(7, 0.03);
  m.record_tokens(2, 0.02);
  m.record_finished("length", 0.9, 0.1);
  const std::string text = r.render();
  for (const char* line : {
           "troupe:num_requests_running{model_name=\"tiny\"} 3.0",
           "troupe:num_requests_waiting{model_name=\"tiny\"} 2.0",
           "troupe:kv_cache_usage_perc{model_name=\"tiny\"} 0.25",
           "troupe:num_preemptions_total{model_name=\"tiny\"} 1.0",
           "troupe:prefix_cache_queries_total{model_name=\"tiny\"} 100.0",
           "troupe:prefix_cache_hits_total{model_name=\"tiny\"} 64.0",
           "troupe:prompt_tokens_total{model_name=\"tiny\"} 7.0",
           "troupe:generation_tokens_total{model_name=\"tiny\"} 3.0",
           "troupe:request_success_total{finished_reason=\"length\",model_name=\"tiny\"} 1.0",
           "troupe:request_success_total{finished_reason=\"stop\",model_name=\"tiny\"} 0.0",
           "troupe:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"} 0.0",
           "troupe:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"} 1.0",
           "troupe:time_to_first_token_seconds_count{model_name=\"tiny\"} 1.0",
           "troupe:time_to_first_token_seconds_sum{model_name=\"tiny\"} 0.03",
           "troupe:inter_token_latency_seconds_bucket{model_name=\"tiny\",le=\"0.01\"} 0.0",
           "troupe:inter_token_latency_seconds_bucket{model_name=\"tiny\",le=\"0.025\"} 1.0",
           "troupe:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"0.8\"} 0.0",
           "troupe:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"1.0\"} 1.0",
           "troupe:request_queue_time_seconds_bucket{model_name=\"tiny\",le=\"0.3\"} 1.0",
           "troupe:num_requests_admitted_per_step_bucket{model_name=\"tiny\",le=\"1.0\"} 0.0",
           "troupe:num_requests_admitted_per_step_bucket{model_name=\"tiny\",le=\"2.0\"} 1.0",
           "troupe:num_requests_admitted_per_step_sum{model_name=\"tiny\"} 2.0",
           "troupe:scheduler_step_time_seconds_bucket{model_name=\"tiny\",le=\"0.00025\"} 0.0",
           "troupe:scheduler_step_time_seconds_bucket{model_name=\"tiny\",le=\"0.0005\"} 1.0",
           "troupe:scheduler_step_time_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 1.0",
       })
    EXPECT_TRUE(has_line(text, line)) << line << "\n" << text;
  // Every sample line is "name{labels} value" or "name value"; HELP precedes TYPE.
  std::string last_help;
  for (const std::string& l : lines(text)) {
    if (l.starts_with("# HELP ")) {
      last_help = l.substr(7, l.find(' ', 7) - 7);
    } else if (l.starts_with("# TYPE ")) {
      EXPECT_EQ(l.substr(7, l.find(' ', 7) - 7), last_help);
    } else {
      EXPECT_TRUE(l.starts_with(last_help)) << l;
      EXPECT_EQ(std::count(l.begin(), l.end(), ' '), 1) << l;
    }
  }
}

// vLLM's speculative decoding counters, the per-position one labelled by position.
TEST(Metrics, SpecDecodeCounters) {
  Registry r;
  ServingMetrics m(r, "tiny");
  for (const char* line : {"# TYPE troupe:spec_decode_num_drafts_total counter",
                           "# TYPE troupe:spec_decode_num_draft_tokens_total counter",
                           "# TYPE troupe:spec_decode_num_accepted_tokens_total counter"})
    EXPECT_TRUE(has_line(r.render(), line)) << line;
  const std::vector<int64_t> per_pos = {5, 3, 1};
  m.record_spec_decode(6, 18, 9, per_pos);
  m.record_spec_decode(1, 3, 1, std::vector<int64_t>{1, 0, 0});
  const std::string text = r.render();
  for (const char* line : {
           "troupe:spec_decode_num_drafts_total{model_name=\"tiny\"} 7.0",
           "troupe:spec_decode_num_draft_tokens_total{model_name=\"tiny\"} 21.0",
           "troupe:spec_decode_num_accepted_tokens_total{model_name=\"tiny\"} 10.0",
           "troupe:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\",model_name=\"tiny\"} 6.0",
           "troupe:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\",model_name=\"tiny\"} 3.0",
           "troupe:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\",model_name=\"tiny\"} 1.0",
       })
    EXPECT_TRUE(has_line(text, line)) << line << "\n" << text;
}

// Live EPLB's series, one set per model: the target's and the DSpark draft's (balanced
// apart) under the same family names, told apart by the model label.
TEST(Metrics, EplbSeriesPerModel) {
  Registry r;
  ServingMetrics m(r, "tiny");
  const ServingMetrics::EplbSeries target = m.eplb("target"), draft = m.eplb("draft");
  target.rebalances.inc(2);
  target.balance_after.set(0.5);
  draft.rebalances.inc(3);
  draft.balance_after.set(0.75);
  draft.balance_before.set(0.25);
  EXPECT_EQ(&m.eplb("draft").rebalances, &draft.rebalances);  // registered once
  // The value of the one line of `family` that has every label of `labels`.
  auto value = [text = r.render()](const std::string& family, std::vector<std::string> labels) {
    std::vector<std::string> found;
    for (const std::string& l : lines(text)) {
      if (l.rfind(family + "{", 0) != 0) continue;
      if (std::all_of(labels.begin(), labels.end(),
                      [&](const std::string& x) { return l.find(x) != std::string::npos; }))
        found.push_back(l.substr(l.rfind(' ') + 1));
    }
    return found.size() == 1 ? found[0] : "lines: " + std::to_string(found.size());
  };
  EXPECT_EQ(value("troupe:eplb_rebalances_total", {"model=\"target\""}), "2.0");
  EXPECT_EQ(value("troupe:eplb_rebalances_total", {"model=\"draft\""}), "3.0");
  EXPECT_EQ(value("troupe:eplb_balance", {"model=\"target\"", "when=\"after\""}), "0.5");
  EXPECT_EQ(value("troupe:eplb_balance", {"model=\"draft\"", "when=\"after\""}), "0.75");
  EXPECT_EQ(value("troupe:eplb_balance", {"model=\"draft\"", "when=\"before\""}), "0.25");
}

}  // namespace
}  // namespace troupe::net::metrics
