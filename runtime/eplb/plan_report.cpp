#include "runtime/eplb/plan_report.h"

#include <algorithm>

#include "kernels/check.h"
#include "runtime/eplb/balance.h"

namespace troupe::runtime::eplb {

std::vector<double> unreplicated_balances(const ExpertLoads& loads, int64_t num_ranks) {
  const int64_t L = loads.num_layers, n = loads.num_logical;
  TROUPE_CHECK(num_ranks >= 1, "num_ranks must be >= 1, got ", num_ranks);
  TROUPE_CHECK(loads.weight.size() == static_cast<size_t>(L * n), "loads: expected [", L, ", ", n,
               "] values, got ", loads.weight.size());
  std::vector<double> out(static_cast<size_t>(L));
  std::vector<double> rank_load(static_cast<size_t>(num_ranks));
  for (int64_t l = 0; l < L; ++l) {
    std::fill(rank_load.begin(), rank_load.end(), 0.0);
    for (int64_t e = 0; e < n; ++e) rank_load[e * num_ranks / n] += loads.weight[l * n + e];
    out[l] = balance_of(rank_load);
  }
  return out;
}

EplbPlanReport make_plan_report(const ExpertLoads& loads, const EplbTopology& topology) {
  topology.validate(loads.num_logical);
  EplbPlanReport r;
  r.placement = rebalance_experts(loads.weight, loads.num_layers, loads.num_logical, topology);
  r.balance_before = unreplicated_balances(loads, topology.num_gpus);
  r.balance_after = layer_balances(r.placement, loads.weight, topology.num_gpus);
  return r;
}

}  // namespace troupe::runtime::eplb
