// The EPLB planner (MODEL.md §9): deepseek-ai/EPLB's README example (its printed output),
// hand-worked packing, replication, a global plan, dispatch and the static EP4 layout, the
// plan invariants on random loads, policy selection, balance gains on skewed loads, and
// argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "runtime/eplb/balance.h"
#include "runtime/eplb/dispatch.h"
#include "runtime/eplb/expert_placement.h"
#include "runtime/eplb/packing.h"
#include "runtime/eplb/rebalance.h"
#include "runtime/eplb/static_placement.h"

namespace troupe::runtime::eplb {
namespace {

using Ints = std::vector<int64_t>;

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected troupe::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "error '" << e.what() << "' does not mention '" << needle << "'";
  }
}

Ints layer_row(const std::vector<int64_t>& v, int64_t layer, int64_t width) {
  return Ints(v.begin() + layer * width, v.begin() + (layer + 1) * width);
}

// The slots of one expert, as a set (replica ranks are not part of the README's output).
std::set<int64_t> slots_of(const ExpertPlacement& p, int64_t layer, int64_t expert) {
  std::set<int64_t> out;
  for (int64_t r = 0; r < p.replica_count(layer, expert); ++r)
    out.insert(p.slot_of(layer, expert, r));
  return out;
}

// ---- deepseek-ai/EPLB README: 2 layers, 12 experts in 4 groups, 16 slots, 2 nodes x 4 GPUs

TEST(Eplb, ReadmeExampleHierarchical) {
  const std::vector<float> weight = {90, 132, 40,  61, 104, 165, 39,  4,   73,  56, 183, 86,
                                     20, 107, 104, 64, 19,  197, 187, 157, 172, 86, 16,  27};
  const EplbTopology t{.num_physical = 16, .num_groups = 4, .num_nodes = 2, .num_gpus = 8};
  ASSERT_TRUE(t.hierarchical());
  const ExpertPlacement p = rebalance_experts(weight, 2, 12, t);

  // The README's printed phy2log.
  EXPECT_EQ(layer_row(p.phy2log, 0, 16), (Ints{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1}));
  EXPECT_EQ(layer_row(p.phy2log, 1, 16), (Ints{7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}));
  // logcnt counted by hand from those rows.
  EXPECT_EQ(layer_row(p.logcnt, 0, 12), (Ints{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1}));
  EXPECT_EQ(layer_row(p.logcnt, 1, 12), (Ints{1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1}));
  EXPECT_EQ(p.max_replicas, 2);
  EXPECT_EQ(slots_of(p, 0, 5), (std::set<int64_t>{0, 2}));
  EXPECT_EQ(slots_of(p, 0, 1), (std::set<int64_t>{13, 15}));
  EXPECT_EQ(slots_of(p, 1, 8), (std::set<int64_t>{3, 6}));
  EXPECT_EQ(p.slot_of(0, 0, 0), 12);
  EXPECT_EQ(p.slot_of(0, 0, 1), -1);
  check_placement(p);
}

// ---- balanced_packing

TEST(EplbPacking, HandWorkedGreedy) {
  // Order by weight: 0(5) 2(4) 4(3) 5(3) 3(2) 1(1); packs of 3:
  //   0->p0 [5]; 2->p1 [4]; 4->p1 [7]; 5->p0 [8]; 3->p1 [9, full]; 1->p0 [9].
  const Packing k = balanced_packing(std::vector<float>{5, 1, 4, 2, 3, 3}, 2);
  EXPECT_EQ(k.pack_index, (Ints{0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(k.rank_in_pack, (Ints{0, 2, 0, 2, 1, 1}));
}

TEST(EplbPacking, TiesAreStableAndPickTheLowestPack) {
  // Equal weights keep index order and equal packs pick the lower id: 0->p0, 1->p1,
  // 2->p0 (1 == 1), 3->p1.
  const Packing k = balanced_packing(std::vector<float>{1, 1, 1, 1}, 2);
  EXPECT_EQ(k.pack_index, (Ints{0, 1, 0, 1}));
  EXPECT_EQ(k.rank_in_pack, (Ints{0, 0, 1, 1}));
  // All zero: a zero never makes a pack heavier, so every pack stays tied and the lowest
  // pack with room takes the next item: pack 0 fills first, then pack 1, then pack 2.
  const Packing z = balanced_packing(std::vector<float>{0, 0, 0, 0, 0, 0}, 3);
  EXPECT_EQ(z.pack_index, (Ints{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(z.rank_in_pack, (Ints{0, 1, 0, 1, 0, 1}));
}

TEST(EplbPacking, IdentityWhenPacksEqualItems) {
  for (const int64_t n : {1, 3, 17}) {
    std::vector<float> w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>((i * 7) % 5);
    const Packing k = balanced_packing(w, n);
    Ints iota(static_cast<size_t>(n));
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(k.pack_index, iota) << "n = " << n;
    EXPECT_EQ(k.rank_in_pack, Ints(static_cast<size_t>(n), 0)) << "n = " << n;
  }
}

TEST(EplbPacking, OnePackTakesAllInWeightOrder) {
  const Packing k = balanced_packing(std::vector<float>{2, 9, 2, 5}, 1);
  EXPECT_EQ(k.pack_index, (Ints{0, 0, 0, 0}));
  // Order 1 (9), 3 (5), 0 (2), 2 (2): the equal 2s keep index order.
  EXPECT_EQ(k.rank_in_pack, (Ints{2, 0, 3, 1}));
}

// ---- replicate_experts

TEST(EplbReplicate, PicksTheLargestLoadPerReplica) {
  // Slots 3..5: loads 10/1 6/1 3/1 -> 0; 5 6 3 -> 1; 5 3 3 -> 0.
  const Replication r = replicate_experts(std::vector<float>{10, 6, 3}, 6);
  EXPECT_EQ(r.phy2log, (Ints{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(r.rank, (Ints{0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(r.logcnt, (Ints{3, 2, 1}));
}

TEST(EplbReplicate, TiesPickTheLowestIndex) {
  // Slot 2: 2 vs 4 -> 1; slot 3: 2 vs 4/2 = 2, a tie -> 0.
  const Replication r = replicate_experts(std::vector<float>{2, 4}, 4);
  EXPECT_EQ(r.phy2log, (Ints{0, 1, 1, 0}));
  EXPECT_EQ(r.rank, (Ints{0, 0, 1, 1}));
  EXPECT_EQ(r.logcnt, (Ints{2, 2}));
}

TEST(EplbReplicate, NoRedundantSlotsIsIdentity) {
  const Replication r = replicate_experts(std::vector<float>{3, 1, 2}, 3);
  EXPECT_EQ(r.phy2log, (Ints{0, 1, 2}));
  EXPECT_EQ(r.logcnt, (Ints{1, 1, 1}));
}

// ---- a global plan worked by hand, its balance, and dispatch on it

// w = [6, 1, 3, 2], 6 slots on 2 GPUs. Replicate: slot 4 -> e0 (6), slot 5 -> e0 (3 vs 3, a
// tie, lower index). Per-replica loads [2, 1, 3, 2, 2, 2]; pack by 3s in order 2,0,3,4,5,1:
//   2->g0 [3]; 0->g1 [2]; 3->g1 [4]; 4->g0 [5]; 5->g1 [6, full]; 1->g0 [6].
// GPU 0 slots 0..2 = replicas 2, 4, 1 = e2, e0 (rank 1), e1; GPU 1 slots 3..5 = replicas
// 0, 3, 5 = e0 (rank 0), e3, e0 (rank 2).
ExpertPlacement hand_worked_global_plan() {
  const EplbTopology t{.num_physical = 6, .num_groups = 1, .num_nodes = 1, .num_gpus = 2};
  return rebalance_experts(std::vector<float>{6, 1, 3, 2}, 1, 4, t);
}

TEST(Eplb, HandWorkedGlobalPlan) {
  const ExpertPlacement p = hand_worked_global_plan();
  EXPECT_EQ(p.phy2log, (Ints{2, 0, 1, 0, 3, 0}));
  EXPECT_EQ(p.logcnt, (Ints{3, 1, 1, 1}));
  EXPECT_EQ(p.max_replicas, 3);
  EXPECT_EQ(p.log2phy, (Ints{3, 1, 5, 2, -1, -1, 0, -1, -1, 4, -1, -1}));
}

TEST(EplbBalance, HandWorkedBeforeAndAfter) {
  const std::vector<float> load = {6, 1, 3, 2};
  // After: GPU 0 = 3 + 6/3 + 1 = 6, GPU 1 = 6/3 + 2 + 6/3 = 6.
  const ExpertPlacement p = hand_worked_global_plan();
  EXPECT_EQ(gpu_loads(p, 0, load, 2), (std::vector<double>{6, 6}));
  EXPECT_DOUBLE_EQ(layer_balances(p, load, 2)[0], 1.0);
  // Before: e0, e1 on GPU 0 (7), e2, e3 on GPU 1 (5): mean 6 / max 7.
  const ExpertPlacement before = unreplicated_placement(1, 4);
  EXPECT_EQ(gpu_loads(before, 0, load, 2), (std::vector<double>{7, 5}));
  EXPECT_DOUBLE_EQ(layer_balances(before, load, 2)[0], 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(balance_of(std::vector<double>{0, 0}), 1.0);
}

TEST(EplbDispatch, ModRuleAndLocalPreference) {
  const ExpertPlacement p = hand_worked_global_plan();  // e0 replicas by rank: slots 3, 1, 5
  const int64_t spg = 3;
  // No local GPU: token index mod 3 picks the replica rank.
  EXPECT_EQ(choose_replica(p, 0, 0, 0, -1, spg), 3);
  EXPECT_EQ(choose_replica(p, 0, 0, 1, -1, spg), 1);
  EXPECT_EQ(choose_replica(p, 0, 0, 2, -1, spg), 5);
  EXPECT_EQ(choose_replica(p, 0, 0, 4, -1, spg), 1);
  // GPU 0 has one replica of e0 (slot 1); GPU 1 has two (3 rank 0, 5 rank 2): the lower rank.
  for (int64_t token : {0, 1, 2, 7}) {
    EXPECT_EQ(choose_replica(p, 0, 0, token, 0, spg), 1);
    EXPECT_EQ(choose_replica(p, 0, 0, token, 1, spg), 3);
  }
  // e1 lives only on GPU 0 (slot 2): a token on GPU 1 still goes there.
  EXPECT_EQ(choose_replica(p, 0, 1, 5, 1, spg), 2);
  expect_error([&] { choose_replica(p, 0, 4, 0, 0, spg); }, "expert 4");
  expect_error([&] { choose_replica(p, 0, 0, 0, 0, 4); }, "slots_per_gpu");
}

// ---- static SGLang EP4 layout

TEST(EplbStatic, SglangEp4NeighborCopies) {
  const ExpertPlacement p = neighbor_copy_placement(2, 384, 4, 8);
  EXPECT_EQ(p.num_physical, 416);
  EXPECT_EQ(p.max_replicas, 2);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t s = 0; s < 96; ++s) EXPECT_EQ(p.logical_of(l, s), s);  // GPU 0's own
    for (int64_t k = 0; k < 8; ++k) {
      EXPECT_EQ(p.logical_of(l, 96 + k), 96 + k);   // GPU 0 copies GPU 1's first 8
      EXPECT_EQ(p.logical_of(l, 104 + k), 96 + k);  // GPU 1's own first 8
      EXPECT_EQ(p.logical_of(l, 408 + k), k);       // GPU 3 copies GPU 0's first 8
    }
    for (int64_t e = 0; e < 384; ++e) EXPECT_EQ(p.replica_count(l, e), e % 96 < 8 ? 2 : 1);
  }
  EXPECT_EQ(p.slot_of(0, 0, 0), 0);
  EXPECT_EQ(p.slot_of(0, 0, 1), 408);
  EXPECT_EQ(p.slot_of(1, 96, 0), 104);
  EXPECT_EQ(p.slot_of(1, 96, 1), 96);
  check_placement(p);

  // Uniform load: each GPU = 88 + 8/2 own + 8/2 copies = 96.
  const std::vector<float> uniform(2 * 384, 1.0f);
  EXPECT_EQ(gpu_loads(p, 0, std::span(uniform).first(384), 4), (std::vector<double>(4, 96.0)));
  // Only expert 0 busy: split between GPU 0 and GPU 3 -> 0.5, vs 0.25 with no copies.
  std::vector<float> hot(384, 0.0f);
  hot[0] = 100;
  EXPECT_EQ(gpu_loads(p, 0, hot, 4), (std::vector<double>{50, 0, 0, 50}));
  EXPECT_DOUBLE_EQ(balance_of(gpu_loads(p, 0, hot, 4)), 0.5);
  EXPECT_DOUBLE_EQ(balance_of(gpu_loads(unreplicated_placement(1, 384), 0, hot, 4)), 0.25);
}

// ---- invariants on random loads

struct Shape {
  int64_t layers, logical;
  EplbTopology topology;
};

std::vector<float> random_loads(int64_t layers, int64_t logical, uint32_t seed, bool zipf) {
  std::mt19937 rng(seed);
  std::vector<float> w(static_cast<size_t>(layers * logical));
  for (int64_t l = 0; l < layers; ++l) {
    Ints perm(static_cast<size_t>(logical));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t e = 0; e < logical; ++e)
      w[l * logical + perm[e]] = zipf ? std::floor(10000.0f / static_cast<float>(e + 1))
                                      : static_cast<float>(rng() % 1000);
  }
  return w;
}

const Shape kShapes[] = {
    {3, 12, {16, 4, 2, 8}},     // README topology (hierarchical)
    {2, 12, {24, 4, 4, 4}},     // one group per node
    {3, 12, {16, 3, 2, 8}},     // groups do not divide by nodes -> global
    {2, 384, {416, 1, 1, 32}},  // flash EP32 + 32 redundant
    {2, 384, {448, 1, 8, 64}},  // flash EP64 + 64 redundant on 8 nodes -> global
    {2, 17, {17, 1, 1, 1}},     // no redundancy, one GPU
    {2, 33, {36, 3, 1, 3}},     // odd sizes
    {1, 1, {3, 1, 1, 3}},       // one expert, three replicas
    {0, 5, {5, 1, 1, 5}},       // no layers
};

TEST(Eplb, PlanInvariantsOnRandomLoads) {
  uint32_t seed = 11;
  for (const Shape& s : kShapes)
    for (const bool zipf : {false, true}) {
      SCOPED_TRACE("Nlog " + std::to_string(s.logical) + " Nphy " +
                   std::to_string(s.topology.num_physical) + " gpus " +
                   std::to_string(s.topology.num_gpus) + (zipf ? " zipf" : " uniform"));
      const auto w = random_loads(s.layers, s.logical, seed++, zipf);
      const ExpertPlacement p = rebalance_experts(w, s.layers, s.logical, s.topology);
      ASSERT_EQ(p.num_physical, s.topology.num_physical);
      check_placement(p);  // >= 1 replica each, counts sum to Nphy, log2phy inverts phy2log
      for (int64_t l = 0; l < s.layers; ++l) {
        int64_t sum = 0;
        for (int64_t e = 0; e < s.logical; ++e) sum += p.replica_count(l, e);
        EXPECT_EQ(sum, s.topology.num_physical);
        // Every GPU's slots hold real experts and the loads add up to the layer's total.
        const auto w_l = std::span(w).subspan(l * s.logical, s.logical);
        const auto loads = gpu_loads(p, l, w_l, s.topology.num_gpus);
        EXPECT_NEAR(std::accumulate(loads.begin(), loads.end(), 0.0),
                    std::accumulate(w_l.begin(), w_l.end(), 0.0), 1e-6 * (1 + loads.size()) * 1e4);
      }
    }
}

TEST(Eplb, HierarchicalKeepsEachGroupOnOneNode) {
  // 6 groups of 4 experts, 3 nodes (2 groups each) of 2 GPUs, 36 slots: 12 per node.
  const EplbTopology t{36, 6, 3, 6};
  const auto w = random_loads(4, 24, 5, true);
  const ExpertPlacement p = rebalance_experts(w, 4, 24, t);
  check_placement(p);
  for (int64_t l = 0; l < 4; ++l) {
    std::map<int64_t, std::set<int64_t>> nodes_of_group;
    for (int64_t slot = 0; slot < 36; ++slot)
      nodes_of_group[p.logical_of(l, slot) / 4].insert(slot / 12);
    ASSERT_EQ(nodes_of_group.size(), 6u);
    std::map<int64_t, int> groups_on_node;
    for (const auto& [group, nodes] : nodes_of_group) {
      EXPECT_EQ(nodes.size(), 1u) << "group " << group << " spans nodes in layer " << l;
      ++groups_on_node[*nodes.begin()];
    }
    for (const auto& [node, count] : groups_on_node) EXPECT_EQ(count, 2) << "node " << node;
  }
}

TEST(Eplb, GlobalPolicyWhenGroupsDoNotDivideByNodes) {
  const auto w = random_loads(3, 12, 9, true);
  const EplbTopology t{16, 3, 2, 8};  // 3 groups on 2 nodes
  EXPECT_FALSE(t.hierarchical());
  const ExpertPlacement global = rebalance_experts(w, 3, 12, t);
  const ExpertPlacement flat = rebalance_hierarchical(w, 3, 12, {16, 1, 1, 8});
  EXPECT_EQ(global.phy2log, flat.phy2log);
  EXPECT_EQ(global.log2phy, flat.log2phy);
  expect_error([&] { rebalance_hierarchical(w, 3, 12, t); }, "does not divide num_groups");
  // With groups that divide, the hierarchical plan differs from the global one here.
  const EplbTopology h{16, 4, 2, 8};
  EXPECT_TRUE(h.hierarchical());
  EXPECT_NE(rebalance_experts(w, 3, 12, h).phy2log, flat.phy2log);
}

TEST(EplbBalance, PlannerBeatsNoReplicasOnSkewedLoads) {
  for (const EplbTopology& t : {EplbTopology{416, 1, 1, 32}, EplbTopology{448, 1, 1, 64}}) {
    const auto w = random_loads(4, 384, 21, true);
    const auto before = layer_balances(unreplicated_placement(4, 384), w, t.num_gpus);
    const auto after = layer_balances(rebalance_experts(w, 4, 384, t), w, t.num_gpus);
    for (size_t l = 0; l < after.size(); ++l) {
      EXPECT_LT(before[l], 0.6) << "layer " << l;  // the Zipf load is badly skewed
      EXPECT_GT(after[l], 0.9) << "layer " << l;   // and the plan evens it out
    }
  }
}

// ---- argument errors name the argument

TEST(Eplb, Errors) {
  const std::vector<float> w(2 * 12, 1.0f);
  expect_error([&] { rebalance_experts(w, 2, 12, {18, 1, 1, 4}); }, "num_physical 18");
  expect_error([&] { rebalance_experts(w, 2, 12, {8, 1, 1, 4}); }, "num_physical 8");
  expect_error([&] { rebalance_experts(w, 2, 12, {16, 5, 5, 8}); }, "num_groups 5");
  expect_error([&] { rebalance_experts(w, 2, 12, {16, 4, 3, 8}); }, "num_nodes 3");
  expect_error([&] { rebalance_experts(w, 2, 12, {16, 0, 1, 8}); }, "num_groups");
  expect_error([&] { rebalance_experts(w, 2, 12, {16, 1, 1, 0}); }, "num_gpus");
  expect_error([&] { rebalance_experts(w, 3, 12, {16, 1, 1, 8}); }, "weight");
  std::vector<float> bad = w;
  bad[13] = -1;
  expect_error([&] { rebalance_experts(bad, 2, 12, {16, 1, 1, 8}); }, "weight[1, 1]");
  bad[13] = NAN;
  expect_error([&] { rebalance_experts(bad, 2, 12, {16, 1, 1, 8}); }, "weight[1, 1]");
  expect_error([] { balanced_packing(std::vector<float>{1, 2, 3}, 2); }, "num_packs");
  expect_error([] { replicate_experts(std::vector<float>{1, 2, 3}, 2); }, "num_physical");
  expect_error([] { neighbor_copy_placement(1, 384, 5, 8); }, "num_gpus 5");
  expect_error([] { neighbor_copy_placement(1, 384, 4, 97); }, "copies_per_gpu");
  expect_error([] { make_placement(1, 2, 3, Ints{0, 1, 1}, Ints{0, 0, 0}); }, "twice");
  expect_error([] { make_placement(1, 2, 3, Ints{0, 0, 0}, Ints{0, 1, 2}); }, "logcnt[0, 1]");
  const ExpertPlacement p = unreplicated_placement(1, 4);
  expect_error([&] { gpu_loads(p, 0, std::vector<float>(4, 1), 3); }, "num_gpus 3");
  expect_error([&] { gpu_loads(p, 0, std::vector<float>(5, 1), 2); }, "load");
}

}  // namespace
}  // namespace troupe::runtime::eplb
