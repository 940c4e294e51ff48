// The two greedy steps of the EPLB planner (MODEL.md §9, deepseek-ai/EPLB eplb.py), one
// MoE layer (one row of weights) at a time. Weights are f32 token counts and all sums and
// ratios are taken in f32, as eplb.py does, so ties break the same way.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe::runtime::eplb {

struct Packing {
  std::vector<int64_t> pack_index;    // [n] pack of each item
  std::vector<int64_t> rank_in_pack;  // [n] position of the item in its pack, 0-based
};

// Packs n weighted items into num_packs packs of exactly n / num_packs items each, heaviest
// item first (stable: equal weights keep the lower index first), each into the lightest
// pack that still has room (ties: the lowest pack id). With num_packs == n every item is
// its own pack (identity). Throws troupe::Error unless n % num_packs == 0.
Packing balanced_packing(std::span<const float> weight, int64_t num_packs);

struct Replication {
  std::vector<int64_t> phy2log;  // [num_physical] logical item of each replica slot
  std::vector<int64_t> rank;     // [num_physical] replica rank of each slot
  std::vector<int64_t> logcnt;   // [n] replicas of each logical item
};

// Replicates n logical items into num_physical >= n slots: slot i < n holds item i, and
// each further slot goes to the item with the largest weight / replica count (ties: the
// lowest index), minimizing the largest load per replica greedily.
Replication replicate_experts(std::span<const float> weight, int64_t num_physical);

}  // namespace troupe::runtime::eplb
