// The report of `troupe bench serve`, laid out like vllm's so the figures compare line
// by line: totals, throughput, then one markdown table of latency statistics in ms.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "bench/common/stats.h"
#include "bench/serve/serve_bench.h"

namespace troupe::bench {
namespace {

void line(const char* name, double v, int decimals = 2) {
  std::printf("%-36s %.*f\n", name, decimals, v);
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

void stat_row(const char* name, const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (double s : seconds) ms.push_back(s * 1e3);
  if (ms.empty()) ms.push_back(0);  // no samples: zeros, not a crash
  std::printf("| %s | %zu | %.2f | %.2f | %.2f | %.2f |\n", name, seconds.size(), mean(ms),
              percentile(ms, 0.5), percentile(ms, 0.9), percentile(ms, 0.99));
}

}  // namespace

void print_serve_report(const ServeBenchConfig& c, const ServeBenchRun& run) {
  const ServeTotals t = serve_totals(run);
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestResult& r : run.requests) {
    if (!r.ok) continue;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.latency_s);
    if (r.output_tokens > 1) tpot.push_back((r.latency_s - r.ttft_s) / double(r.output_tokens - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  for (const RequestResult& r : run.requests)
    if (!r.ok) {
      std::printf("first failure: %s\n", r.error.c_str());
      break;
    }
  const double d = run.duration_s > 0 ? run.duration_s : 1e-9;
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-36s %lld\n", "Successful requests:", static_cast<long long>(t.ok));
  std::printf("%-36s %lld\n", "Failed requests:", static_cast<long long>(t.failed));
  std::printf("%-36s %lld\n", "Maximum request concurrency:",
              static_cast<long long>(c.max_concurrency));
  line("Request rate configured (req/s):", c.request_rate > 0 ? c.request_rate : INFINITY);
  line("Benchmark duration (s):", run.duration_s);
  std::printf("%-36s %lld\n", "Total input tokens:", static_cast<long long>(t.input));
  std::printf("%-36s %lld\n", "Total cached input tokens:", static_cast<long long>(t.cached));
  std::printf("%-36s %lld\n", "Total uncached input tokens:", static_cast<long long>(t.uncached()));
  std::printf("%-36s %lld\n", "Total generated tokens:", static_cast<long long>(t.output));
  line("Prefix cache hit rate (%):", 100 * t.hit_rate());
  line("Request throughput (req/s):", double(t.ok) / d);
  line("Input token throughput (tok/s):", double(t.input) / d);
  line("Cached input throughput (tok/s):", double(t.cached) / d);
  line("Uncached input throughput (tok/s):", double(t.uncached()) / d);
  line("Output token throughput (tok/s):", double(t.output) / d);
  line("Total token throughput (tok/s):", double(t.input + t.output) / d);
  std::printf("\n| metric | samples | mean ms | p50 ms | p90 ms | p99 ms |\n");
  std::printf("|---|---|---|---|---|---|\n");
  stat_row("TTFT", ttft);
  stat_row("TPOT", tpot);
  stat_row("ITL", itl);
  stat_row("E2E", e2e);
  std::printf("==================================================\n");
}

}  // namespace troupe::bench
