// `troupe bench mirror-lag`: the price of DP imbalance, by the seeds' mirror vs lag replay.
// The same requests go to every rank of a DEP-R instance (runtime/dep/dep_engine.h):
// "mirror" hands every rank its copy at step 0, "lag D" hands rank r its copy at step
// r x D. Both runs do the same work, but the ranks step in lockstep, so a step takes as
// long as its busiest rank: under lag one rank prefills while the others decode or idle
// (running dummy steps), and the spread costs steps and wall time. Mirror is the baseline
// of the same run.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/engine/engine_setup.h"
#include "model/forward.h"

namespace troupe::bench {

struct MirrorLagConfig {
  int ranks = 2;                        // --data-parallel-size of the instance
  int64_t requests = 4;                 // per rank (each rank gets a copy of the same set)
  int64_t prompt_len = 256;             // tokens; request i's prompt is random, seed + i
  int64_t max_tokens = 32;              // generated per request (greedy, EOS ignored)
  std::vector<int64_t> lags = {4, 16};  // D of each lag run, in steps
  uint64_t seed = 1;
  EngineBenchConfig engine;             // per rank; prefix cache off (copies never share)

  void validate() const;  // throws troupe::Error naming the bad field
};

struct MirrorLagRun {
  int64_t lag = 0;              // 0: mirror
  int64_t steps = 0;            // lockstep steps (some rank had work)
  int64_t idle_rank_steps = 0;  // dummy steps: a rank with nothing to do joined the step
  int64_t tokens = 0;           // Σ scheduled tokens over ranks and steps
  double dp_balance = 0;        // mean over steps of mean rank tokens / max rank tokens
  double wall_s = 0;            // Σ step wall time
  double step_p50_s = 0, step_p99_s = 0;
  // [ranks x requests] the tokens of rank r's copy of request i at r x requests + i.
  std::vector<std::vector<int32_t>> outputs;

  double tokens_per_s() const { return wall_s > 0 ? double(tokens) / wall_s : 0; }
};

// One run on a fresh DepEngine (lag 0: mirror).
MirrorLagRun run_mirror_lag(const model::Forward& forward, const MirrorLagConfig& c,
                            int64_t lag);

// Whether every copy of every request produced the same tokens in every run (DEP-R's
// results do not depend on the rank or the arrival time).
bool copies_agree(const MirrorLagConfig& c, const std::vector<MirrorLagRun>& runs);

void print_mirror_lag_report(const MirrorLagConfig& c, const std::vector<MirrorLagRun>& runs);

}  // namespace troupe::bench
