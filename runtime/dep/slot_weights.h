// One expert-parallel rank's own copy of the routed-expert weights its slots hold, for
// every MoE layer of one model (DEP-R, DESIGN.md: each rank owns its shard): the target's
// layers, or the DSpark draft's (its own placement, MODEL.md §9: balanced separately).
// Built from the model's weights for a placement. Live EPLB builds the next placement's copy in the background
// while the rank serves steps with the current one; every rank switches at one step.
//
//   placement slots of rank r:  [r·S, (r+1)·S) per layer      (S = Nphy / R)
//   slot(l, s) = the weights of expert placement.logical_of(l, r·S + s) in layer l,
//                in memory of this object's own
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/moe.h"
#include "model/routed_experts.h"
#include "model/weights.h"
#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime {

using model::draft_moe_layers;
using model::MoeLayers;
using model::target_moe_layers;

class SlotWeights {
 public:
  // Copies, from `layers`, the experts that rank `rank` of `ranks` holds under `placement`.
  // Throws troupe::Error when the placement does not fit the layers.
  SlotWeights(const MoeLayers& layers, const eplb::ExpertPlacement& placement, int rank, int ranks);
  // The target's layers.
  SlotWeights(const model::ModelWeights& model, const eplb::ExpertPlacement& placement, int rank,
              int ranks)
      : SlotWeights(target_moe_layers(model), placement, rank, ranks) {}
  SlotWeights(const SlotWeights&) = delete;
  SlotWeights& operator=(const SlotWeights&) = delete;

  int64_t slots_per_rank() const { return slots_; }
  // The copy of local slot `slot`'s expert in MoE layer `layer`.
  const kernels::ExpertWeights& slot(int64_t layer, int64_t slot) const {
    return views_[layer * slots_ + slot];
  }
  // Whether this copy was made from `moe` as layer `layer` (the batch's own experts): a
  // MoE the copy is not of (a DSpark draft's, say) runs from its own weights.
  bool copies(int64_t layer, const model::ExpertTable* moe) const {
    return layer >= 0 && layer < static_cast<int64_t>(source_.size()) && source_[layer] == moe;
  }
  bool copies(int64_t layer, const model::MoeWeights* moe) const {  // a V4.1 layer's experts
    return copies(layer, &moe->experts);
  }
  int64_t bytes() const { return bytes_; }

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  kernels::WeightView copy_view(const kernels::WeightView& w);

  int64_t slots_ = 0;
  int64_t bytes_ = 0;
  std::vector<kernels::ExpertWeights> views_;           // [L, S] into buffers_
  std::vector<const model::ExpertTable*> source_;       // [L] what each layer copied
  std::vector<std::unique_ptr<std::byte, AlignedFree>> buffers_;
};

}  // namespace troupe::runtime
