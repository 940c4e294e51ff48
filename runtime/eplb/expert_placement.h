// An expert placement: which logical expert each physical expert slot of each MoE layer
// holds, and its inverse (MODEL.md §9). Slots are numbered GPU-major, so GPU g holds the
// slots [g·S, (g+1)·S) with S = Nphy / num_gpus:
//
//   slot      0   1   2   3 | 4   5   6   7        (Nphy = 8, 2 GPUs, S = 4)
//   phy2log   5   0   5   2 | 1   3   4   0
//   rank      0   0   1   0 | 0   0   0   1        replica rank of the slot's expert
//   log2phy[5] = [0, 2], log2phy[0] = [1, 7], log2phy[2] = [3, -1], ...   (max_cnt = 2)
//   logcnt[5] = 2, logcnt[0] = 2, logcnt[2] = 1, ...
//
// Pure data plus its consistency check; the planner (rebalance.h) builds one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe::runtime::eplb {

struct ExpertPlacement {
  int64_t num_layers = 0;    // L, MoE layers
  int64_t num_logical = 0;   // Nlog, logical (routed) experts per layer
  int64_t num_physical = 0;  // Nphy, physical expert slots per layer (Nlog + redundant)
  int64_t max_replicas = 0;  // max_cnt, the largest logcnt over all layers and experts

  std::vector<int64_t> phy2log;  // [L, Nphy] logical expert held by each slot
  std::vector<int64_t>
      log2phy;                  // [L, Nlog, max_cnt] slots of each expert by replica rank; -1 after
  std::vector<int64_t> logcnt;  // [L, Nlog] replicas of each logical expert, >= 1

  int64_t logical_of(int64_t layer, int64_t slot) const {
    return phy2log[layer * num_physical + slot];
  }
  int64_t replica_count(int64_t layer, int64_t expert) const {
    return logcnt[layer * num_logical + expert];
  }
  // The slot holding replica `rank` (< replica_count) of the expert.
  int64_t slot_of(int64_t layer, int64_t expert, int64_t rank) const {
    return log2phy[(layer * num_logical + expert) * max_replicas + rank];
  }

  bool operator==(const ExpertPlacement&) const = default;
};

// Builds a placement from phy2log and each slot's replica rank (both [L, Nphy]): derives
// logcnt and log2phy. Throws troupe::Error (naming the argument) unless every logical
// expert has replicas of ranks 0..logcnt-1, each exactly once.
ExpertPlacement make_placement(int64_t num_layers, int64_t num_logical, int64_t num_physical,
                               std::span<const int64_t> phy2log, std::span<const int64_t> phy_rank);

// The layout before any rebalancing: no replicas, slot e holds logical expert e, so with
// G GPUs expert e sits on GPU e div (Nlog / G) (MODEL.md §9 "before").
ExpertPlacement unreplicated_placement(int64_t num_layers, int64_t num_logical);

// Throws troupe::Error unless the placement's three maps agree with each other (log2phy is
// the inverse of phy2log, counts sum to Nphy, every expert has >= 1 replica). For tests and
// for placements read from outside.
void check_placement(const ExpertPlacement& placement);

}  // namespace troupe::runtime::eplb
