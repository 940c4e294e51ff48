// `troupe bench forward --dep 1,2,4`: the decode step of B sequences spread over R ranks
// of one process (runtime/dep: attention data-parallel, MoE expert-parallel over an
// InProcessGroup), each rank on its own thread with its own kernel threads, split into
// where the time went: the ranks' own layers (attention, norms, gate, shared expert, head),
// route, dispatch, experts and combine. Next to it, in the same run, the same batch on
// one rank without expert parallelism (the baseline).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/forward/forward_bench.h"

namespace troupe::bench {

struct DepStepSplit {
  int ranks = 0;          // 0: the baseline (plain forward, no expert parallelism)
  double step_s = 0;      // median decode step (all ranks done)
  // Per decode step, mean over ranks; the exchanges include waiting for the slowest rank.
  double route_s = 0, dispatch_s = 0, experts_s = 0, combine_s = 0;
  // The DP-sync all-reduce of the step's metadata before it (recursive doubling among the
  // rank threads, bench/dp_sync/inproc_all_reduce.h), as the schedulers run it.
  double sync_s = 0;
  double rows_sent = 0, rows_kept = 0;  // per step, summed over ranks
};

// Prefills each rank's sequences (untimed), then times N decode steps.
DepStepSplit time_dep_decode(const model::Forward& forward, const ForwardBenchShape& shape,
                             int ranks);
DepStepSplit time_plain_decode(const model::Forward& forward, const ForwardBenchShape& shape);

void print_dep_table(const ForwardBenchShape& shape, const std::vector<DepStepSplit>& rows);

}  // namespace troupe::bench
