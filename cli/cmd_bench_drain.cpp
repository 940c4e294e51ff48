// `troupe bench drain --base-url http://ROUTER:PORT --instance NAME [--api-key KEY
// --num-prompts 8 --input-len 64 --output-len 400 --drain-after 50 --seed 0 --no-check]`:
// streams through a cluster router, drains decode instance NAME once every stream has
// streamed --drain-after chunks, and prints the
// gap across each move beside the streams' ordinary TPOT (bench/serve/drain_bench.h;
// bench/serve/drain_gap.sh starts a 1P2D cluster for it).
#include <cstdio>
#include <string>

#include "bench/serve/drain_bench.h"
#include "cli/args.h"
#include "cli/bench_drain.h"
#include "kernels/check.h"

namespace troupe::cli {
namespace {

int64_t positive(const Args& a, const char* flag, int64_t fallback) {
  const int64_t v = a.get_int(flag, fallback);
  if (v < 1) TROUPE_FAIL("--" << flag << " must be at least 1, got " << v);
  return v;
}

}  // namespace

int bench_drain(const CommandArgs& argv) {
  Args a(argv, {"base-url", "instance", "api-key", "num-prompts", "input-len", "output-len",
                "drain-after", "seed", "max-token-id"},
         {"no-check"});
  if (!a.positional().empty()) TROUPE_FAIL("bench drain takes flags only, got '" << a.positional()[0] << "'");
  if (!a.has("instance")) TROUPE_FAIL("bench drain needs --instance NAME (a decode instance)");
  bench::DrainBenchConfig c;
  c.base = bench::parse_base_url(a.get_or("base-url", "http://127.0.0.1:8000"));
  c.instance = *a.get("instance");
  c.api_key = a.get_or("api-key", "");
  c.num_prompts = positive(a, "num-prompts", c.num_prompts);
  c.input_len = positive(a, "input-len", c.input_len);
  c.output_len = positive(a, "output-len", c.output_len);
  c.max_token_id = static_cast<int32_t>(positive(a, "max-token-id", c.max_token_id));
  c.seed = static_cast<uint64_t>(a.get_int("seed", 0));
  c.drain_after = positive(a, "drain-after", c.drain_after);
  c.check = !a.has("no-check");
  bench::ServeBenchConfig reach;
  reach.base = c.base;
  bench::check_reachable(reach);
  std::printf("troupe bench drain: %s:%u, instance %s, %lld streams, input %lld, output %lld tokens\n",
              c.base.host.c_str(), unsigned(c.base.port), c.instance.c_str(),
              static_cast<long long>(c.num_prompts), static_cast<long long>(c.input_len),
              static_cast<long long>(c.output_len));
  std::fflush(stdout);
  bench::print_drain_report(c, bench::run_drain_bench(c));
  return 0;
}

}  // namespace troupe::cli
