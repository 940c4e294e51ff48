// `troupe bench eplb`: the EPLB planner (runtime/eplb) on flash's MoE shape with synthetic
// routing (bench/eplb/routing_sim.h). For each routing (Zipf-skewed and uniform) and each
// EP topology: the planner reads the token counts of a window of steps, then the balance
// (mean / max GPU load, MODEL.md §9) is measured on fresh steps of the same routing:
//   before      no replicas, expert e on GPU e div (Nlog / G)
//   after       the plan, each expert's tokens split evenly over its replicas (§9 metric)
//   dispatched  the plan, each token sent by the dispatch rule (local replica first, else
//               token index mod logcnt), counting tokens per GPU
// and the planner's CPU time per rebalance of all layers. Figures only, never pass/fail.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/eplb/rebalance.h"

namespace troupe::bench {

struct EplbBenchConfig {
  int64_t layers = 40;           // MoE layers rebalanced together
  int64_t experts = 384;         // logical routed experts per layer
  int64_t top_k = 6;             // experts per token
  int64_t tokens_per_gpu = 288;  // per decode step: 72 requests x (1 + 3 DSpark drafts)
  int64_t window_steps = 20;     // steps whose counts the planner reads
  int64_t eval_steps = 10;       // fresh steps the balance is measured on
  double zipf = 0.8;             // skew; 0.8 gives before ~0.33 at EP32 (seed: 0.35)
  uint64_t seed = 1;
  int64_t repeats = 5;                                  // planner timings per topology
  std::vector<runtime::eplb::EplbTopology> topologies;  // empty: EP32 x 416/448, EP64 x 448

  void validate() const;  // throws troupe::Error naming the field
};

struct EplbBenchRow {
  std::string routing;  // "zipf 1.00" or "uniform"
  runtime::eplb::EplbTopology topology;
  double before = 0, after = 0, dispatched = 0;  // mean over eval steps x layers
  double after_min = 0;                          // the worst layer-step after the plan
  std::vector<double> plan_cpu_ms;               // [repeats] CPU time of one rebalance_experts call
};

std::vector<runtime::eplb::EplbTopology> default_eplb_topologies();

std::vector<EplbBenchRow> run_eplb_bench(const EplbBenchConfig& config);

void print_eplb_report(const EplbBenchConfig& config, const std::vector<EplbBenchRow>& rows);

}  // namespace troupe::bench
