// `troupe bench ucx [--steps 200 --warmup 20 --sync-steps 2000 --sync-warmup 200
// --kv-put-repeats 20 --peer-errors]` (docs/ucx.md, docs/pd.md). It starts its second rank as `troupe bench ucx --rank 1
// --dir DIR` with the same flags (--rank and --dir are for that child only).
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/bench_ucx.h"
#include "kernels/check.h"
#ifdef TROUPE_HAVE_UCX
#include "bench/ucx/ucx_bench.h"
#endif

namespace troupe::cli {

int bench_ucx(const CommandArgs& argv) {
  Args a(argv, {"steps", "warmup", "sync-steps", "sync-warmup", "kv-put-repeats", "rank", "dir"}, {"peer-errors"});
  if (!a.positional().empty()) TROUPE_FAIL("bench ucx takes flags only, got '" << a.positional()[0] << "'");
#ifdef TROUPE_HAVE_UCX
  bench::UcxBenchConfig c;
  c.steps = a.get_int("steps", c.steps);
  c.warmup = a.get_int("warmup", c.warmup);
  c.sync_steps = a.get_int("sync-steps", c.sync_steps);
  c.sync_warmup = a.get_int("sync-warmup", c.sync_warmup);
  c.kv_put_repeats = a.get_int("kv-put-repeats", c.kv_put_repeats);
  c.peer_errors = a.has("peer-errors");
  c.validate();
  if (a.has("rank") || a.has("dir")) {
    if (!a.has("dir") || a.get_int("rank", 0) != 1)
      TROUPE_FAIL("--rank 1 --dir DIR are the bench's own child's flags; run `troupe bench ucx` without them");
    return bench::run_ucx_bench_peer(c, *a.get("dir"));
  }
  std::vector<std::string> child;
  for (const char* f : {"steps", "warmup", "sync-steps", "sync-warmup", "kv-put-repeats"})
    if (a.has(f)) child.insert(child.end(), {std::string("--") + f, *a.get(f)});
  if (c.peer_errors) child.push_back("--peer-errors");
  return bench::run_ucx_bench(c, "/proc/self/exe", child);
#else
  TROUPE_FAIL("this troupe was built without UCX (install libucx-dev and rebuild): no bench ucx");
#endif
}

}  // namespace troupe::cli
