// The live EPLB planner of one instance (vLLM's --enable-eplb / --eplb-config): it keeps the
// per-layer, per-logical-expert token counts of the last `window_size` steps and every
// `step_interval` steps plans a new placement from them with rebalance_experts, for the
// same number of slots and ranks. Pure logic; the engine applies the placement on every
// rank at one step boundary.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime::eplb {

struct EplbConfig {
  bool enabled = false;           // --enable-eplb
  int64_t window_size = 1000;     // steps of counts a plan looks at
  int64_t step_interval = 3000;   // steps between plans
};

struct Rebalance {
  int64_t step = 0;                     // the planner's step count when it was made
  ExpertPlacement placement;
  std::vector<double> balance_before;   // [L] of the window's loads on the old placement
  std::vector<double> balance_after;    // [L] on the new one
};

// The mean over layers of a per-layer balance (MODEL.md §9); 0 for none.
double mean_balance(const std::vector<double>& per_layer);
// For logs: "step 3000: mean balance 0.412 -> 0.874 over 40 layers".
std::string describe(const Rebalance& r);

class EplbPlanner {
 public:
  EplbPlanner(EplbConfig config, int64_t num_layers, int64_t num_logical, int64_t num_physical,
              int64_t num_ranks);

  // One step's counts [L, Nlog] (summed over ranks), with the placement in use. Every
  // step_interval steps plans from the window: per layer the better of the plan and the
  // placement in use; nullopt when no layer gains (or nothing was routed).
  std::optional<Rebalance> record(std::span<const int64_t> counts, const ExpertPlacement& current);

  // [L, Nlog] the window's loads.
  std::vector<float> window_loads() const;

 private:
  EplbConfig config_;
  int64_t layers_, logical_, physical_, ranks_;
  int64_t steps_ = 0;
  std::deque<std::vector<int64_t>> window_;
  std::vector<int64_t> sum_;  // Σ window_
};

}  // namespace troupe::runtime::eplb
