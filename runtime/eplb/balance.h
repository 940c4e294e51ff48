// The balance metric of MODEL.md §9: per MoE layer, a GPU's load is the sum over its slots
// of (load of the slot's logical expert / logcnt of that expert), i.e. an expert's tokens
// split evenly over its replicas; balance = mean GPU load / max GPU load, 1 = perfect.
// "Before rebalancing" is the same metric on unreplicated_placement (expert e on GPU
// e div (Nlog / G)).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime::eplb {

// [num_gpus] loads of one layer; load: [Nlog] tokens per logical expert. Throws
// troupe::Error unless num_gpus divides Nphy and load has Nlog values.
std::vector<double> gpu_loads(const ExpertPlacement& placement, int64_t layer,
                              std::span<const float> load, int64_t num_gpus);

// mean / max of the loads; 1 when every load is 0 (nothing to balance).
double balance_of(std::span<const double> loads);

// [L] balance of each layer; loads: [L, Nlog].
std::vector<double> layer_balances(const ExpertPlacement& placement, std::span<const float> loads,
                                   int64_t num_gpus);

}  // namespace troupe::runtime::eplb
