#include "runtime/speculative/dspark_drafter.h"

#include "kernels/check.h"

namespace troupe::runtime {

void DsparkDrafter::propose_batch(std::span<const DraftQuery> queries,
                                  std::span<std::vector<int32_t>* const> out,
                                  model::RoutedExperts& routed) const {
  TROUPE_CHECK(out.size() == queries.size(), "drafter: ", out.size(), " outputs for ",
               queries.size(), " queries");
  // Reused across steps (their capacity), one set per thread: ranks share the drafter.
  thread_local std::vector<model::DraftInput> inputs;
  thread_local std::vector<model::DraftProposal> proposals;
  inputs.clear();
  for (const DraftQuery& q : queries)
    inputs.push_back({q.features, q.anchor, q.anchor_token, q.bonus, q.k});
  if (proposals.size() < queries.size()) proposals.resize(queries.size());
  draft_.propose_batch(inputs, std::span(proposals).first(queries.size()), routed);
  for (size_t i = 0; i < queries.size(); ++i)
    out[i]->insert(out[i]->end(), proposals[i].tokens.begin(), proposals[i].tokens.end());
}

}  // namespace troupe::runtime
