// `troupe bench eplb --counts FILE`: the EPLB planner on routing recorded from a real run
// (expert-counts-file: one line of [[tokens per expert] per layer] per step), beside a
// synthetic Zipf trace of the same shape in the same run. The planner reads the counts of
// the first window_steps steps; the balance (MODEL.md §9, mean / max rank load) is then
// measured on the steps after them, per step and layer:
//   before  the placement an instance starts with (runtime/eplb's default EP layout)
//   after   the plan
// Counts carry no per-token picks, so there is no "dispatched" column here. Figures only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/eplb/expert_loads_json.h"
#include "runtime/eplb/rebalance.h"

namespace troupe::bench {

struct EplbCountsBenchConfig {
  std::vector<int64_t> gpus = {2, 4, 8};  // EP ranks to plan for
  int64_t redundant = -1;                 // extra slots; -1: one per rank
  int64_t window_steps = 20;              // at most half the recording
  int64_t eval_steps = 100;               // at most the rest
  double zipf = 0.8;                      // the synthetic trace beside it
  int64_t top_k = 6;                      // the synthetic trace's picks per token
  uint64_t seed = 1;
  void validate() const;  // throws troupe::Error naming the flag
};

struct EplbCountsRow {
  std::string routing;  // "recorded" or "zipf 0.80 (synthetic)"
  runtime::eplb::EplbTopology topology;
  double before = 0, after = 0, after_min = 1;  // mean over eval steps x layers; worst after
};

struct EplbCountsRun {
  int64_t steps = 0, layers = 0, experts = 0;
  int64_t window = 0, eval = 0;   // steps the planner read, steps measured
  double picks_per_step = 0;      // recorded routed picks per layer per step (mean)
  std::vector<EplbCountsRow> rows;
};

EplbCountsRun run_eplb_counts_bench(const std::vector<runtime::eplb::ExpertLoads>& trace,
                                    const EplbCountsBenchConfig& config);
void print_eplb_counts_report(const EplbCountsRun& run);

}  // namespace troupe::bench
