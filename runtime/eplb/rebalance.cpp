#include "runtime/eplb/rebalance.h"

#include <cmath>
#include <vector>

#include "kernels/check.h"
#include "runtime/eplb/packing.h"

namespace troupe::runtime::eplb {

void EplbTopology::validate(int64_t num_logical) const {
  TROUPE_CHECK(num_logical >= 1, "num_logical must be >= 1, got ", num_logical);
  TROUPE_CHECK(num_groups >= 1, "num_groups must be >= 1, got ", num_groups);
  TROUPE_CHECK(num_nodes >= 1, "num_nodes must be >= 1, got ", num_nodes);
  TROUPE_CHECK(num_gpus >= 1, "num_gpus must be >= 1, got ", num_gpus);
  TROUPE_CHECK(num_logical % num_groups == 0, "num_groups ", num_groups, " does not divide the ",
               num_logical, " logical experts");
  TROUPE_CHECK(num_gpus % num_nodes == 0, "num_nodes ", num_nodes, " does not divide num_gpus ",
               num_gpus);
  TROUPE_CHECK(num_physical >= num_logical, "num_physical ", num_physical, " is below the ",
               num_logical, " logical experts");
  TROUPE_CHECK(num_physical % num_gpus == 0, "num_physical ", num_physical,
               " is not a multiple of num_gpus ", num_gpus);
}

namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// Step 1: pack the groups onto nodes. Returns mlog2log: the logical experts in "meta-logical"
// order, node-major, so node k owns meta-logical experts [k·n/nodes, (k+1)·n/nodes):
//   mlog = (node · groups_per_node + rank of the group in its node) · group_size + k
std::vector<int64_t> meta_logical_order(std::span<const float> w, const EplbTopology& t) {
  const auto n = static_cast<int64_t>(w.size());
  const int64_t group_size = n / t.num_groups;
  const int64_t groups_per_node = t.num_groups / t.num_nodes;
  std::vector<float> group_load(static_cast<size_t>(t.num_groups));
  for (int64_t g = 0; g < t.num_groups; ++g) {
    double sum = 0;  // exact for token counts below 2^53; rounded once to f32
    for (int64_t k = 0; k < group_size; ++k) sum += w[g * group_size + k];
    group_load[g] = static_cast<float>(sum);
  }
  const Packing nodes = balanced_packing(group_load, t.num_nodes);
  std::vector<int64_t> log2mlog(static_cast<size_t>(n));
  for (int64_t g = 0; g < t.num_groups; ++g)
    for (int64_t k = 0; k < group_size; ++k)
      log2mlog[g * group_size + k] =
          (nodes.pack_index[g] * groups_per_node + nodes.rank_in_pack[g]) * group_size + k;
  return inverse(log2mlog);
}

// Steps 2 and 3 for one node: replicate its experts (node_experts, logical ids in
// meta-logical order) into the node's slots, then pack the replicas onto the node's GPUs by
// load per replica. Writes the node's slots of slot2log and slot_rank ([Nphy / nodes] each).
void place_node(std::span<const float> w, std::span<const int64_t> node_experts,
                const EplbTopology& t, std::span<int64_t> slot2log, std::span<int64_t> slot_rank) {
  const int64_t slots_per_node = t.num_physical / t.num_nodes;
  std::vector<float> w_node(node_experts.size());
  for (size_t j = 0; j < node_experts.size(); ++j) w_node[j] = w[node_experts[j]];
  const Replication rep = replicate_experts(w_node, slots_per_node);

  std::vector<float> w_replica(static_cast<size_t>(slots_per_node));
  for (int64_t i = 0; i < slots_per_node; ++i) {
    const int64_t j = rep.phy2log[i];
    w_replica[i] = w_node[j] / static_cast<float>(rep.logcnt[j]);
  }
  const Packing gpus = balanced_packing(w_replica, t.num_gpus / t.num_nodes);
  for (int64_t i = 0; i < slots_per_node; ++i) {
    const int64_t slot = gpus.pack_index[i] * t.slots_per_gpu() + gpus.rank_in_pack[i];
    slot2log[slot] = node_experts[rep.phy2log[i]];
    slot_rank[slot] = rep.rank[i];
  }
}

void check_weight(std::span<const float> weight, int64_t num_layers, int64_t num_logical) {
  TROUPE_CHECK(num_layers >= 0, "num_layers must be >= 0, got ", num_layers);
  TROUPE_CHECK(weight.size() == static_cast<size_t>(num_layers * num_logical),
               "weight: expected [num_layers, num_logical] = [", num_layers, ", ", num_logical,
               "], got ", weight.size(), " values");
  for (size_t i = 0; i < weight.size(); ++i)
    TROUPE_CHECK(std::isfinite(weight[i]) && weight[i] >= 0, "weight[", i / num_logical, ", ",
                 i % num_logical, "] = ", weight[i], " is not a finite count >= 0");
}

}  // namespace

ExpertPlacement rebalance_hierarchical(std::span<const float> weight, int64_t num_layers,
                                       int64_t num_logical, const EplbTopology& t) {
  t.validate(num_logical);
  TROUPE_CHECK(t.hierarchical(), "num_nodes ", t.num_nodes, " does not divide num_groups ",
               t.num_groups, " (the hierarchical policy packs whole groups onto nodes)");
  check_weight(weight, num_layers, num_logical);
  const int64_t experts_per_node = num_logical / t.num_nodes;
  const int64_t slots_per_node = t.num_physical / t.num_nodes;
  std::vector<int64_t> slot2log(static_cast<size_t>(num_layers * t.num_physical));
  std::vector<int64_t> slot_rank(slot2log.size());
  for (int64_t l = 0; l < num_layers; ++l) {
    const auto w = weight.subspan(l * num_logical, num_logical);
    const std::vector<int64_t> mlog2log = meta_logical_order(w, t);
    for (int64_t node = 0; node < t.num_nodes; ++node) {
      const int64_t first_slot = l * t.num_physical + node * slots_per_node;
      place_node(w, std::span(mlog2log).subspan(node * experts_per_node, experts_per_node), t,
                 std::span(slot2log).subspan(first_slot, slots_per_node),
                 std::span(slot_rank).subspan(first_slot, slots_per_node));
    }
  }
  return make_placement(num_layers, num_logical, t.num_physical, slot2log, slot_rank);
}

ExpertPlacement rebalance_experts(std::span<const float> weight, int64_t num_layers,
                                  int64_t num_logical, const EplbTopology& t) {
  t.validate(num_logical);
  if (t.hierarchical()) return rebalance_hierarchical(weight, num_layers, num_logical, t);
  EplbTopology global = t;  // replicate and pack globally, ignoring groups and nodes
  global.num_groups = 1;
  global.num_nodes = 1;
  return rebalance_hierarchical(weight, num_layers, num_logical, global);
}

}  // namespace troupe::runtime::eplb
