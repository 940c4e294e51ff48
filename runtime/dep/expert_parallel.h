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
#include <vector>

#include "kernels/moe.h"
#include "model/routed_experts.h"
#include "runtime/dep/communicator.h"
#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime {

class ExpertParallel : public model::RoutedExperts {
 public:
  // placement: the instance's, shared by its ranks (one table, switched between steps).
  ExpertParallel(Communicator& comm, std::shared_ptr<const eplb::ExpertPlacement> placement);

  void run(const model::RoutedBatch& batch) override;

  // Replaces the placement; all ranks must switch at the same step boundary.
  void set_placement(std::shared_ptr<const eplb::ExpertPlacement> placement);
  int64_t slots_per_rank() const { return slots_per_rank_; }

 private:
  Communicator& comm_;
  std::shared_ptr<const eplb::ExpertPlacement> placement_;
  int64_t slots_per_rank_ = 0;
};

}  // namespace troupe::runtime
