#include "bench/serve/engine_compare.h"

#include <cstdio>

namespace troupe::bench {
namespace {

// One side of the comparison, whichever run it came from.
struct Side {
  const char* name;
  int64_t requests, input, cached, output;
  double wall_s;
};

double per_second(int64_t n, double s) {
  return s > 0 ? double(n) / s : 0;
}

void row(const Side& s) {
  const int64_t uncached = s.input - s.cached;
  std::printf(
      "| %s | %lld | %lld | %lld | %lld | %lld | %.1f%% | %.2f | %.2f | %.1f | %.1f | %.1f | "
      "%.1f |\n",
      s.name, static_cast<long long>(s.requests), static_cast<long long>(s.input),
      static_cast<long long>(s.cached), static_cast<long long>(uncached),
      static_cast<long long>(s.output), s.input ? 100.0 * double(s.cached) / double(s.input) : 0,
      s.wall_s, per_second(s.requests, s.wall_s), per_second(s.cached, s.wall_s),
      per_second(uncached, s.wall_s), per_second(s.output, s.wall_s),
      per_second(s.input + s.output, s.wall_s));
}

}  // namespace

void print_engine_comparison(const ServeBenchRun& served, const ReplayRun& engine) {
  const ServeTotals t = serve_totals(served);
  const Side server{"served (HTTP)", t.ok, t.input, t.cached, t.output, served.duration_s};
  const Side local{"engine (in-process)", engine.turns,         engine.prompt_tokens,
                   engine.cached_tokens,  engine.output_tokens, engine.wall_s};
  std::printf("\n============ Served vs engine-only ============\n");
  std::printf(
      "| run | requests | input tokens | cached input | uncached input | output tokens | hit rate "
      "| wall s | req/s | cached in tok/s | uncached in tok/s | output tok/s | total tok/s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  row(server);
  row(local);
  if (engine.wall_s > 0)
    std::printf("\nserving overhead: served wall / engine wall = %.2fx\n",
                served.duration_s / engine.wall_s);
  std::fflush(stdout);
}

}  // namespace troupe::bench
