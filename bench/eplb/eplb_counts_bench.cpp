#include "bench/eplb/eplb_counts_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/eplb/routing_sim.h"
#include "kernels/check.h"
#include "runtime/eplb/balance.h"
#include "runtime/eplb/static_placement.h"

namespace troupe::bench {
namespace {

using runtime::eplb::EplbTopology;
using runtime::eplb::ExpertPlacement;

// Plans on window (summed counts [L, Nlog]) for each rank count and measures before /
// after on every eval step's counts.
void add_rows(const std::string& routing, const std::vector<float>& window,
              const std::vector<std::vector<float>>& eval, int64_t L, int64_t E,
              const EplbCountsBenchConfig& c, std::vector<EplbCountsRow>& rows) {
  for (int64_t g : c.gpus) {
    const ExpertPlacement start =
        runtime::eplb::ep_default_placement(L, E, g, c.redundant < 0 ? g : c.redundant);
    EplbCountsRow row{routing, {start.num_physical, 1, 1, g}, 0, 0, 1};
    const ExpertPlacement plan = runtime::eplb::rebalance_experts(window, L, E, row.topology);
    for (const std::vector<float>& step : eval) {
      const auto before = runtime::eplb::layer_balances(start, step, g);
      const auto after = runtime::eplb::layer_balances(plan, step, g);
      for (int64_t l = 0; l < L; ++l) {
        row.before += before[l];
        row.after += after[l];
        row.after_min = std::min(row.after_min, after[l]);
      }
    }
    const double n = static_cast<double>(eval.size() * L);
    row.before /= n;
    row.after /= n;
    rows.push_back(row);
  }
}

}  // namespace

void EplbCountsBenchConfig::validate() const {
  if (gpus.empty()) TROUPE_FAIL("--gpus needs at least one rank count");
  for (int64_t g : gpus)
    if (g < 1 || g > 4096) TROUPE_FAIL("--gpus: " << g << " is not in [1, 4096]");
  if (redundant < -1 || redundant > (1 << 20)) TROUPE_FAIL("--redundant must be >= 0, got " << redundant);
  if (window_steps < 1) TROUPE_FAIL("--window-steps must be at least 1, got " << window_steps);
  if (eval_steps < 1) TROUPE_FAIL("--eval-steps must be at least 1, got " << eval_steps);
  if (!(zipf >= 0) || !std::isfinite(zipf)) TROUPE_FAIL("--zipf must be >= 0, got " << zipf);
  if (top_k < 1) TROUPE_FAIL("--top-k must be at least 1, got " << top_k);
}

EplbCountsRun run_eplb_counts_bench(const std::vector<runtime::eplb::ExpertLoads>& trace,
                                    const EplbCountsBenchConfig& c) {
  c.validate();
  TROUPE_CHECK(trace.size() >= 2, "--counts: a recording of ", trace.size(),
               " steps; the planner needs a window and steps after it (at least 2)");
  EplbCountsRun run;
  run.steps = static_cast<int64_t>(trace.size());
  run.layers = trace.front().num_layers;
  run.experts = trace.front().num_logical;
  const int64_t L = run.layers, E = run.experts;
  TROUPE_CHECK(c.top_k <= E, "--top-k ", c.top_k, " exceeds the recording's ", E, " experts");
  run.window = std::min(c.window_steps, run.steps / 2);
  run.eval = std::min(c.eval_steps, run.steps - run.window);

  std::vector<float> window(static_cast<size_t>(L * E), 0.0f);
  double picks = 0;
  for (int64_t s = 0; s < run.steps; ++s)
    for (size_t i = 0; i < window.size(); ++i) {
      if (s < run.window) window[i] += trace[s].weight[i];
      picks += trace[s].weight[i];
    }
  run.picks_per_step = picks / double(run.steps * L);
  std::vector<std::vector<float>> eval;
  for (int64_t s = run.window; s < run.window + run.eval; ++s) eval.push_back(trace[s].weight);
  add_rows("recorded", window, eval, L, E, c, run.rows);

  // The synthetic trace: as many tokens per step as the recording routed on average.
  const int64_t tokens = std::max<int64_t>(1, std::llround(run.picks_per_step / double(c.top_k)));
  const RoutingSim sim({L, E, c.top_k, c.zipf, c.seed});
  std::vector<std::vector<float>> sim_eval;
  for (int64_t s = run.window; s < run.window + run.eval; ++s)
    sim_eval.push_back(sim.window_counts(s, 1, tokens));
  char name[48];
  std::snprintf(name, sizeof name, "zipf %.2f (synthetic)", c.zipf);
  add_rows(name, sim.window_counts(0, run.window, tokens), sim_eval, L, E, c, run.rows);
  return run;
}

void print_eplb_counts_report(const EplbCountsRun& r) {
  std::printf(
      "recorded: %lld steps, %lld MoE layers x %lld experts, %.1f routed picks per layer per "
      "step (mean)\nplanner window: steps [0, %lld); balance (mean / max rank load) measured on "
      "steps [%lld, %lld), averaged over steps x layers\n\n",
      static_cast<long long>(r.steps), static_cast<long long>(r.layers),
      static_cast<long long>(r.experts), r.picks_per_step, static_cast<long long>(r.window),
      static_cast<long long>(r.window), static_cast<long long>(r.window + r.eval));
  std::printf("%-22s %5s %6s %8s %7s %8s\n", "routing", "ranks", "slots", "before", "after",
              "(worst)");
  for (const EplbCountsRow& row : r.rows)
    std::printf("%-22s %5lld %6lld %8.3f %7.3f %8.3f\n", row.routing.c_str(),
                static_cast<long long>(row.topology.num_gpus),
                static_cast<long long>(row.topology.num_physical), row.before, row.after,
                row.after_min);
  std::printf("\nbefore: the default EP layout an instance starts with; after: the plan from the "
              "window (MODEL.md 9)\n");
}

}  // namespace troupe::bench
