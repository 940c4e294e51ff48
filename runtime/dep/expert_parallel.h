// One rank's routed experts under expert parallelism (MoE as route -> dispatch ->
// experts -> combine, DESIGN.md): the rank holds the experts of its slots; each of its
// tokens' picks goes to the rank holding a replica of the picked expert (MODEL.md §9's
// rule: a replica on this rank first, else replica token mod count), which runs it and
// sends the result back; the home rank sums in top-k slot order (kernels::moe_combine).
// Dispatch and combine are two all_to_all exchanges on the Communicator.
//
//   dispatch buffer to rank d: per row {int32 local slot on d} + x row [H floats]
//   combine buffer back:       per row y [H floats], in the order the rows came
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/moe.h"
#include "model/routed_experts.h"
#include "runtime/dep/communicator.h"
#include "runtime/dep/slot_weights.h"
#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime {

// Where a rank's MoE time went, summed over calls (for `troupe bench forward --dep`). The
// exchanges include waiting for the slowest rank to arrive.
struct ExpertParallelTimes {
  double route_s = 0;     // replica choice and packing the dispatch buffers
  double dispatch_s = 0;  // the dispatch all_to_all
  double experts_s = 0;   // this rank's experts on the rows that arrived
  double combine_s = 0;   // the combine all_to_all and the weighted sum
  int64_t rows_sent = 0;  // (token, pick) rows sent to other ranks
  int64_t rows_kept = 0;  // rows this rank's own experts took
};

class ExpertParallel : public model::RoutedExperts {
 public:
  // placement: the instance's, shared by its ranks (one table, switched between steps).
  // layers: the MoE layers of the model it serves (the target's, or the DSpark draft's:
  // each has its own ExpertParallel and placement, both on the rank's one communicator);
  // the rank copies its slots' experts from them and runs those copies (its own shard,
  // SlotWeights). Empty: it runs them from each batch's weights in place.
  ExpertParallel(Communicator& comm, std::shared_ptr<const eplb::ExpertPlacement> placement,
                 MoeLayers layers = {});

  void run(const model::RoutedBatch& batch) override;
  void begin_step() override {
    comm_.begin_step();
    steps_begun_ += 1;
  }
  // Steps this rank has joined (begin_step calls): a caller whose step threw tells from it
  // whether the step had begun before aborting it (runtime/dep/rank_step.h).
  int64_t steps_begun() const { return steps_begun_; }
  // Fails the rest of this rank's current step on every rank (Communicator::abort).
  void abort(const std::string& why) { comm_.abort(why); }

  // Live EPLB. A placement is numbered by its epoch (the first is 0). stage() hands over
  // the next one with this rank's copy of its slots' weights (made beforehand, in the
  // background: SlotWeights); use() switches to it. Every rank of the group must call
  // use(e) at the same step boundary (the DP-sync agreed step). Without a copy (constructed
  // with no layers) weights may be null.
  void stage(int64_t epoch, std::shared_ptr<const eplb::ExpertPlacement> placement,
             std::shared_ptr<const SlotWeights> weights);
  void use(int64_t epoch);  // throws troupe::Error unless `epoch` is in use or staged
  int64_t epoch() const { return epoch_; }
  int64_t staged_epoch() const { return staged_ ? staged_epoch_ : epoch_; }
  const MoeLayers& layers() const { return layers_; }
  // This rank's copy of its slots' weights (null: constructed with no layers).
  const SlotWeights* slot_weights() const { return weights_.get(); }
  const eplb::ExpertPlacement& placement() const { return *placement_; }

  int64_t slots_per_rank() const { return slots_per_rank_; }
  const ExpertParallelTimes& times() const { return times_; }
  // [L, Nlog] tokens this rank routed to each logical expert since the last call (the
  // EPLB planner's input), and zeroes them.
  std::vector<int64_t> take_counts();

 private:
  void set_placement(std::shared_ptr<const eplb::ExpertPlacement> placement,
                     std::shared_ptr<const SlotWeights> weights);

  Communicator& comm_;
  MoeLayers layers_;
  std::shared_ptr<const eplb::ExpertPlacement> placement_;
  std::shared_ptr<const SlotWeights> weights_;  // null: the batch's weights in place
  int64_t epoch_ = 0;
  std::shared_ptr<const eplb::ExpertPlacement> staged_;
  std::shared_ptr<const SlotWeights> staged_weights_;
  int64_t staged_epoch_ = 0;
  int64_t slots_per_rank_ = 0;
  int64_t steps_begun_ = 0;
  ExpertParallelTimes times_;
  std::vector<int64_t> counts_;  // [L, Nlog]
};

}  // namespace troupe::runtime
