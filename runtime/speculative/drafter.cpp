#include "runtime/speculative/drafter.h"

#include "kernels/check.h"

namespace troupe::runtime {

// A drafter without MoE layers has nothing to shard, so no rank asks it for a batch.
void Drafter::propose_batch(std::span<const DraftQuery>, std::span<std::vector<int32_t>* const>,
                            model::RoutedExperts&) const {
  TROUPE_CHECK(false, "this drafter has no MoE layers to run expert-parallel");
}

}  // namespace troupe::runtime
