// bench_kernels [--filter SUBSTRING[,SUBSTRING...]] [--quick] [--full] [--list] [--threads N] [--no-limits]
// Measures the machine limits, then runs every registered benchmark whose name contains
// one of the filter's comma-separated parts and prints one markdown table row per case
// (bench.h explains registration).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/limits.h"
#include "bench/common/stats.h"
#include "bench/kernels/bench.h"
#include "kernels/check.h"
#include "kernels/parallel.h"

namespace troupe::bench {
namespace {

struct Flags {
  std::string filter;
  bool quick = false;
  bool full = false;
  bool list = false;
  bool limits = true;
  int threads = 0;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) TROUPE_FAIL("bench_kernels: " << a << " needs a value");
      return argv[++i];
    };
    if (a == "--filter")
      f.filter = value();
    else if (a == "--quick")
      f.quick = true;
    else if (a == "--full")
      f.full = true;
    else if (a == "--list")
      f.list = true;
    else if (a == "--no-limits")
      f.limits = false;
    else if (a == "--threads")
      f.threads = std::atoi(value().c_str());
    else
      TROUPE_FAIL("bench_kernels: unknown flag "
                  << a
                  << " (use --filter NAME, --quick, --full, --list, --threads N, --no-limits)");
  }
  return f;
}

void print_header() {
  std::printf(
      "| benchmark | shape | median ms | min ms | max ms | reps | GFLOP/s | GB/s | %% of limit "
      "|\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
}

void print_row(const std::string& name, const State& s, const MachineLimits* limits) {
  if (!s.skipped().empty() || s.seconds().empty()) {
    std::printf("| %s | %s | skipped: %s | | | | | | |\n", name.c_str(), s.shape.c_str(),
                s.skipped().empty() ? "never called run()" : s.skipped().c_str());
    return;
  }
  const double med = percentile(s.seconds(), 0.5);
  const double gflops = s.flops / med / 1e9;
  const double gbs = s.bytes / med / 1e9;
  char pct[64] = "";
  const double limit = limits ? limit_for(*limits, s.bound, s.path()) : 0;
  const double rate = s.bound == Bound::Memory ? gbs : gflops;
  if (limit > 0 && rate > 0)
    std::snprintf(pct, sizeof pct, "%.0f%% %s", 100 * rate / limit,
                  bound_tag(*limits, s.bound, s.path()).c_str());
  // A "memory-bound" case whose flops take longer at its compute peak (fp32, or int8 for
  // int8 products) than its bytes at DRAM speed cannot reach the DRAM limit: say so, with
  // its share of that peak.
  const double peak = limits ? limit_for(*limits, s.compute, s.path()) : 0;
  if (s.bound == Bound::Memory && limit > 0 && peak > 0 && s.flops / peak > s.bytes / limit)
    std::snprintf(pct + std::strlen(pct), sizeof pct - std::strlen(pct), ", %.0f%% %s",
                  100 * gflops / peak, bound_tag(*limits, s.compute, s.path()).c_str());
  char gf[32] = "", gb[32] = "";
  if (s.flops > 0) std::snprintf(gf, sizeof gf, "%.1f", gflops);
  if (s.bytes > 0) std::snprintf(gb, sizeof gb, "%.1f", gbs);
  std::printf("| %s | %s | %.3f | %.3f | %.3f | %zu | %s | %s | %s |\n", name.c_str(),
              s.shape.c_str(), med * 1e3, percentile(s.seconds(), 0.0) * 1e3,
              percentile(s.seconds(), 1.0) * 1e3, s.seconds().size(), gf, gb, pct);
  std::fflush(stdout);
}

int run(const Flags& f) {
  if (f.threads > 0) kernels::set_num_threads(f.threads);
  std::vector<const Benchmark*> chosen;
  std::vector<std::string> parts;  // "a,b": names containing a or b
  for (size_t at = 0;;) {
    const size_t comma = f.filter.find(',', at);
    parts.push_back(f.filter.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (const Benchmark& b : registry())
    if (std::any_of(parts.begin(), parts.end(), [&](const std::string& p) { return b.name.find(p) != std::string::npos; }))
      chosen.push_back(&b);
  std::sort(chosen.begin(), chosen.end(),
            [](const Benchmark* a, const Benchmark* b) { return a->name < b->name; });
  if (f.list) {
    for (const Benchmark* b : chosen) std::printf("%s\n", b->name.c_str());
    return 0;
  }
  MachineLimits limits;
  if (f.limits) {
    limits = measure_limits(f.quick);
    if (f.threads > 0) kernels::set_num_threads(f.threads);
    print_limits(limits);
  }
  std::printf("threads: %d%s\n\n", kernels::num_threads(), f.quick ? ", --quick" : "");
  print_header();
  for (const Benchmark* b : chosen) {
    State s(f.quick, f.full);
    b->fn(s);
    print_row(b->name, s, f.limits ? &limits : nullptr);
  }
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  try {
    return troupe::bench::run(troupe::bench::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
