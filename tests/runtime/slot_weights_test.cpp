// A rank's own copy of its slots' expert weights (runtime/dep/slot_weights.h) and the
// staged placement switch of ExpertParallel (live EPLB): the copy holds, byte for byte,
// the experts the placement puts on the rank's slots, in memory of its own; a switch
// takes only a staged, newer placement.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/check.h"
#include "runtime/dep/expert_parallel.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/eplb/static_placement.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;

bool same_bytes(const kernels::WeightView& copy, const kernels::WeightView& src) {
  if (copy.format != src.format || copy.rows != src.rows || copy.cols != src.cols) return false;
  const int64_t data = kernels::data_bytes(src), scale = kernels::scale_bytes(src);
  if (copy.data == src.data || (scale > 0 && copy.scale == src.scale)) return false;  // not a copy
  return std::memcmp(copy.data, src.data, data) == 0 &&
         (scale == 0 || std::memcmp(copy.scale, src.scale, scale) == 0);
}

TEST(SlotWeights, HoldCopiesOfTheExpertsOfTheRanksSlots) {
  const auto& g = golden_model();
  const int64_t L = g.config.num_hidden_layers, E = g.config.n_routed_experts;
  const int ranks = 3;
  const auto p = eplb::ep_default_placement(L, E, ranks, /*redundant=*/1);  // 33 slots: 11 each
  for (int r = 0; r < ranks; ++r) {
    const SlotWeights w(g.weights, p, r, ranks);
    ASSERT_EQ(w.slots_per_rank(), p.num_physical / ranks);
    int64_t bytes = 0;
    for (int64_t l = 0; l < L; ++l) {
      EXPECT_TRUE(w.copies(l, &g.weights.layers[l].ffn));
      if (L > 1) {
        EXPECT_FALSE(w.copies(l, &g.weights.layers[(l + 1) % L].ffn));
      }
      for (int64_t s = 0; s < w.slots_per_rank(); ++s) {
        const auto& src = g.weights.layers[l].ffn.experts[p.logical_of(l, r * w.slots_per_rank() + s)];
        const auto& got = w.slot(l, s);
        EXPECT_TRUE(same_bytes(got.w1, src.w1)) << "layer " << l << " slot " << s;
        EXPECT_TRUE(same_bytes(got.w3, src.w3)) << "layer " << l << " slot " << s;
        EXPECT_TRUE(same_bytes(got.w2, src.w2)) << "layer " << l << " slot " << s;
        for (const auto* v : {&src.w1, &src.w3, &src.w2})
          bytes += kernels::data_bytes(*v) + kernels::scale_bytes(*v);
      }
    }
    EXPECT_EQ(w.bytes(), bytes);
    EXPECT_GT(bytes, 0);
  }
}

TEST(SlotWeights, RefuseAPlacementThatDoesNotFitTheModel) {
  const auto& g = golden_model();
  const int64_t L = g.config.num_hidden_layers, E = g.config.n_routed_experts;
  EXPECT_THROW(SlotWeights(g.weights, eplb::ep_default_placement(L + 1, E, 2, 0), 0, 2), Error);
  EXPECT_THROW(SlotWeights(g.weights, eplb::ep_default_placement(L, E, 2, 0), 2, 2), Error);
  EXPECT_THROW(SlotWeights(g.weights, eplb::ep_default_placement(L, E, 2, 0), 0, 3), Error);
}

TEST(ExpertParallelStaging, SwitchesOnlyToTheStagedNewerPlacement) {
  const auto& g = golden_model();
  const int64_t L = g.config.num_hidden_layers, E = g.config.n_routed_experts;
  InProcessGroup group(1);
  auto first = std::make_shared<const eplb::ExpertPlacement>(eplb::ep_default_placement(L, E, 1, 0));
  auto next = std::make_shared<const eplb::ExpertPlacement>(eplb::ep_default_placement(L, E, 1, 2));
  ExpertParallel ep(group.communicator(0), first, target_moe_layers(g.weights));
  EXPECT_EQ(ep.epoch(), 0);
  EXPECT_EQ(ep.staged_epoch(), 0);
  EXPECT_THROW(ep.use(1), Error);  // nothing staged
  EXPECT_THROW(ep.stage(1, next, nullptr), Error);  // a copying rank needs its copy
  EXPECT_THROW(ep.stage(0, next, std::make_shared<const SlotWeights>(g.weights, *next, 0, 1)),
               Error);  // not newer
  ep.stage(1, next, std::make_shared<const SlotWeights>(g.weights, *next, 0, 1));
  EXPECT_EQ(ep.staged_epoch(), 1);
  EXPECT_EQ(ep.epoch(), 0);
  EXPECT_EQ(ep.slots_per_rank(), E);  // still the first placement
  EXPECT_THROW(ep.use(2), Error);
  ep.use(1);
  EXPECT_EQ(ep.epoch(), 1);
  EXPECT_EQ(ep.slots_per_rank(), E + 2);
  EXPECT_EQ(ep.placement().num_physical, E + 2);
  ep.use(1);  // the one in use: nothing to do
  EXPECT_THROW(ep.use(2), Error);
}

}  // namespace
}  // namespace troupe::runtime
