// `troupe bench <benchmark> [flags]`: benchmark programs behind the CLI (figures only,
// never pass/fail). Today: `forward`, the analogue of `vllm bench forward`
// (bench/forward/forward_bench.h says what it measures and how).
#include <cstdio>
#include <string>

#include "bench/common/limits.h"
#include "bench/forward/forward_bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "kernels/check.h"
#include "kernels/parallel.h"

namespace troupe::cli {
namespace {

bench::ForwardBenchShape forward_shape(const Args& a) {
  bench::ForwardBenchShape s;
  s.batch = a.get_int("batch", s.batch);
  s.context = a.get_int("context", s.context);
  s.new_tokens = a.get_int("new-tokens", s.new_tokens);
  s.repeats = a.get_int("repeats", s.repeats);
  if (s.batch < 1) TROUPE_FAIL("--batch must be at least 1, got " << s.batch);
  if (s.context < 1) TROUPE_FAIL("--context must be at least 1, got " << s.context);
  if (s.new_tokens < 0) TROUPE_FAIL("--new-tokens must be at least 0, got " << s.new_tokens);
  if (s.repeats < 1) TROUPE_FAIL("--repeats must be at least 1, got " << s.repeats);
  return s;
}

// Every position the run reaches (C + N − 1) must exist in the model.
void check_fits(const bench::ForwardBenchShape& s, const model::ModelConfig& c) {
  const int64_t max_pos = c.max_position_embeddings;
  if (s.context > max_pos)
    TROUPE_FAIL("--context " << s.context << " is beyond max_position_embeddings " << max_pos);
  if (s.context + s.new_tokens > max_pos)
    TROUPE_FAIL("--context " << s.context << " + --new-tokens " << s.new_tokens
                             << " is beyond max_position_embeddings " << max_pos);
}

int bench_forward(const CommandArgs& argv) {
  Args a(argv, {"model", "batch", "context", "new-tokens", "repeats", "threads"}, {});
  if (!a.positional().empty()) TROUPE_FAIL("unexpected argument '" << a.positional()[0] << "'");
  const bench::ForwardBenchShape shape = forward_shape(a);
  const int64_t threads = a.get_int("threads", 0);
  if (a.has("threads") && threads < 1) TROUPE_FAIL("--threads must be at least 1, got " << threads);

  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false);
  check_fits(shape, m->config);
  kernels::set_num_threads(static_cast<int>(threads));
  const bench::MachineLimits limits = bench::measure_limits(/*quick=*/true);
  kernels::set_num_threads(static_cast<int>(threads));  // the probes reset the count

  std::printf("troupe bench forward: model %s\n", m->dir.c_str());
  std::printf("batch %lld, context %lld, new tokens %lld, repeats %lld, threads %d\n\n",
              static_cast<long long>(shape.batch), static_cast<long long>(shape.context),
              static_cast<long long>(shape.new_tokens), static_cast<long long>(shape.repeats),
              kernels::num_threads());
  bench::print_limits(limits);
  const bench::ForwardTimes times = bench::time_forward(*m->forward, shape);
  bench::print_forward_table(shape, bench::make_forward_cost_model(m->config), times, limits);
  return 0;
}

struct Benchmark {
  const char* name;
  int (*run)(const CommandArgs& args);
};

const Benchmark kBenchmarks[] = {
    {"forward", bench_forward},
};

std::string available() {
  std::string out;
  for (const Benchmark& b : kBenchmarks) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

}  // namespace

int run_bench(const CommandArgs& argv) {
  if (argv.empty()) TROUPE_FAIL("which benchmark? available: " << available());
  for (const Benchmark& b : kBenchmarks)
    if (argv[0] == b.name) return b.run(CommandArgs(argv.begin() + 1, argv.end()));
  TROUPE_FAIL("unknown benchmark '" << argv[0] << "'; available: " << available());
}

}  // namespace troupe::cli
