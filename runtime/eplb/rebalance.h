// The EPLB planner (MODEL.md §9, deepseek-ai/EPLB eplb.py rebalance_experts): from the
// token counts each logical expert received in a window of steps, choose how many replicas
// each expert gets and on which GPU each replica lives, per MoE layer.
//
// Hierarchical policy (when expert groups divide by nodes):
//   1) pack the expert groups onto nodes (balanced_packing of the group loads)
//   2) within each node, replicate its experts into Nphy / nodes slots (replicate_experts)
//   3) within each node, pack the replicas onto its GPUs by load / logcnt (balanced_packing)
// Global policy (otherwise): the same with one group and one node. V4.1 has no expert
// groups (num_groups = 1), so it always takes the global policy for more than one node.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime::eplb {

struct EplbTopology {
  int64_t num_physical = 0;  // Nphy, expert slots per layer (Nlog + redundant), % num_gpus == 0
  int64_t num_groups = 1;    // expert groups (routing groups); divides Nlog
  int64_t num_nodes = 1;     // nodes, where the intra-node network is faster; divides num_gpus
  int64_t num_gpus = 1;      // GPUs (EP ranks)

  int64_t slots_per_gpu() const { return num_physical / num_gpus; }
  // True when rebalance_experts takes the hierarchical policy (groups divide by nodes).
  bool hierarchical() const { return num_groups % num_nodes == 0; }
  // Throws troupe::Error naming the field unless the planner can run for num_logical experts.
  void validate(int64_t num_logical) const;
};

// weight: [num_layers, num_logical] f32 token counts (finite, >= 0).
ExpertPlacement rebalance_experts(std::span<const float> weight, int64_t num_layers,
                                  int64_t num_logical, const EplbTopology& topology);

// The hierarchical policy with exactly the topology given (rebalance_experts calls it with
// one group and one node when groups do not divide by nodes).
ExpertPlacement rebalance_hierarchical(std::span<const float> weight, int64_t num_layers,
                                       int64_t num_logical, const EplbTopology& topology);

}  // namespace troupe::runtime::eplb
