// The serving overhead of `troupe bench serve --dataset-name agentic --engine-model DIR`:
// the served run and the same workload run in-process on runtime::Engine (bench
// replay's driver, bench/engine/replay_bench.h) side by side, with the ratio of their
// wall times. Both run the same seeded workload; outputs are greedy, so the token counts
// agree unless the two cache differently (KV budget, block size, replay mode).
#pragma once

#include "bench/engine/replay_bench.h"
#include "bench/serve/serve_bench.h"

namespace troupe::bench {

void print_engine_comparison(const ServeBenchRun& served, const ReplayRun& engine);

}  // namespace troupe::bench
