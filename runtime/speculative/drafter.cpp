#include "runtime/speculative/drafter.h"

#include "kernels/check.h"

namespace troupe::runtime {

void Drafter::propose_all(std::span<const DraftQuery> queries,
                          std::span<std::vector<int32_t>* const> out) const {
  TROUPE_CHECK(out.size() == queries.size(), "drafter: ", out.size(), " outputs for ",
               queries.size(), " queries");
  for (size_t i = 0; i < queries.size(); ++i) propose(queries[i], *out[i]);
}

// A drafter without MoE layers has nothing to shard, so no rank asks it for a batch.
void Drafter::propose_batch(std::span<const DraftQuery>, std::span<std::vector<int32_t>* const>,
                            model::RoutedExperts&) const {
  TROUPE_CHECK(false, "this drafter has no MoE layers to run expert-parallel");
}

}  // namespace troupe::runtime
