// One EPLB plan with its balance before and after (`troupe eplb plan`, MODEL.md §9): the
// planner (rebalance_experts) on a routing trace's token counts, and the §9 metric per
// layer for the layout before any rebalancing and for the plan.
//
// "Before" is no replicas with logical expert e on rank e div (Nlog / R), the division
// exact, i.e. rank floor(e·R / Nlog): contiguous blocks of Nlog / R experts when R divides
// Nlog (then it is unreplicated_placement), blocks of the two nearest sizes when not.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/eplb/expert_loads_json.h"
#include "runtime/eplb/expert_placement.h"
#include "runtime/eplb/rebalance.h"

namespace troupe::runtime::eplb {

struct EplbPlanReport {
  ExpertPlacement placement;
  std::vector<double> balance_before;  // [L] mean / max rank load, no replicas
  std::vector<double> balance_after;   // [L] the same for the plan
};

// Throws troupe::Error (naming the field) when the topology does not fit the loads.
EplbPlanReport make_plan_report(const ExpertLoads& loads, const EplbTopology& topology);

// [L] balance of the unreplicated layout above over num_ranks ranks; weight: [L, Nlog].
std::vector<double> unreplicated_balances(const ExpertLoads& loads, int64_t num_ranks);

}  // namespace troupe::runtime::eplb
