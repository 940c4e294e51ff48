#include "runtime/speculative/dspark_drafter.h"

#include "kernels/check.h"

namespace troupe::runtime {

void DsparkDrafter::propose_all(std::span<const DraftQuery> queries,
                                std::span<std::vector<int32_t>* const> out) const {
  draft_together(queries, out, nullptr);
}

void DsparkDrafter::propose_batch(std::span<const DraftQuery> queries,
                                  std::span<std::vector<int32_t>* const> out,
                                  model::RoutedExperts& routed) const {
  draft_together(queries, out, &routed);
}

void DsparkDrafter::draft_together(std::span<const DraftQuery> queries,
                                   std::span<std::vector<int32_t>* const> out,
                                   model::RoutedExperts* routed) const {
  TROUPE_CHECK(out.size() == queries.size(), "drafter: ", out.size(), " outputs for ",
               queries.size(), " queries");
  // Reused across steps (their capacity), one set per thread: ranks share the drafter.
  thread_local std::vector<model::DraftInput> inputs;
  thread_local std::vector<model::DraftProposal> proposals;
  inputs.clear();
  for (const DraftQuery& q : queries)
    inputs.push_back({q.features, q.anchor, q.anchor_token, q.bonus, q.k});
  if (proposals.size() < queries.size()) proposals.resize(queries.size());
  const auto props = std::span(proposals).first(queries.size());
  if (routed != nullptr) draft_.propose_batch(inputs, props, *routed);
  else draft_.propose_batch(inputs, props);
  for (size_t i = 0; i < queries.size(); ++i)
    out[i]->insert(out[i]->end(), proposals[i].tokens.begin(), proposals[i].tokens.end());
}

}  // namespace troupe::runtime
