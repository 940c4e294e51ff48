// `troupe bench handoff [--model DIR --prompt-lens 256,1024,4096 --repeats 5 --threads N
// --block-size 64 --kv-budget-mb 256]`: the KV hand-off's costs per prompt length against
// a memcpy of the same bytes and a recompute (bench/engine/handoff_bench.h, docs/pd.md).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/engine/handoff_bench.h"
#include "cli/args.h"
#include "cli/bench_handoff.h"
#include "cli/loaded_model.h"
#include "kernels/check.h"
#include "kernels/parallel.h"

namespace troupe::cli {

int bench_handoff(const CommandArgs& argv) {
  Args a(argv, {"model", "prompt-lens", "repeats", "threads", "block-size", "kv-budget-mb"}, {});
  if (!a.positional().empty()) TROUPE_FAIL("bench handoff takes flags only, got '" << a.positional()[0] << "'");
  std::vector<int64_t> lens;
  for (int32_t v : parse_token_ids(a.get_or("prompt-lens", "256,1024,4096"))) {
    if (v < 1) TROUPE_FAIL("--prompt-lens: each length must be at least 1");
    lens.push_back(v);
  }
  const int64_t repeats = a.get_int("repeats", 5);
  if (repeats < 1) TROUPE_FAIL("--repeats must be at least 1");
  const int64_t threads = a.get_int("threads", 0);
  if (a.has("threads") && threads < 1) TROUPE_FAIL("--threads must be at least 1");
  bench::EngineBenchConfig c;
  c.block_size = a.get_int("block-size", 64);
  c.kv_budget_bytes = a.get_int("kv-budget-mb", 256) << 20;
  c.max_running = 2;
  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false);
  for (int64_t len : lens)
    if (len + 3 > m->config.max_position_embeddings)
      TROUPE_FAIL("--prompt-lens: " << len << " + 3 tokens is past the model's " << m->config.max_position_embeddings << " positions");
  kernels::set_num_threads(static_cast<int>(threads));
  std::printf("troupe bench handoff: model %s, threads %d, block size %lld, %lld repeats\n",
              m->dir.c_str(), kernels::num_threads(), static_cast<long long>(c.block_size),
              static_cast<long long>(repeats));
  bench::warm_up(*m->forward, c);
  bench::print_handoffs(bench::time_handoffs(*m->forward, c, lens, static_cast<int>(repeats)));
  return 0;
}

}  // namespace troupe::cli
