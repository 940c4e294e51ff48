// The DSpark draft network (model/dspark_draft.h) as the engine's drafter: greedy drafts
// from the request's feature ring (MODEL.md §8). On an expert-parallel rank the step's
// queries draft together, the draft's MoE through the rank's exchange (propose_batch).
#pragma once

#include "model/dspark_draft.h"
#include "runtime/speculative/drafter.h"

namespace troupe::runtime {

class DsparkDrafter final : public Drafter {
 public:
  explicit DsparkDrafter(const model::DsparkDraft& draft) : draft_(draft) {}
  using Drafter::propose;
  void propose(const DraftQuery& q, std::vector<int32_t>& out) const override {
    // Reused across calls (its capacity), one per thread: ranks share the drafter.
    thread_local model::DraftProposal proposal;
    draft_.propose(*q.features, q.anchor, q.anchor_token, q.bonus, q.k, proposal);
    out.insert(out.end(), proposal.tokens.begin(), proposal.tokens.end());
  }
  bool needs_features() const override { return true; }
  MoeLayers moe_layers() const override { return model::draft_moe_layers(draft_.weights()); }
  void propose_all(std::span<const DraftQuery> queries,
                   std::span<std::vector<int32_t>* const> out) const override;
  void propose_batch(std::span<const DraftQuery> queries, std::span<std::vector<int32_t>* const> out,
                     model::RoutedExperts& routed) const override;

 private:
  // queries through the draft as one batch; routed: the draft's experts' exchange, or null.
  void draft_together(std::span<const DraftQuery> queries, std::span<std::vector<int32_t>* const> out,
                      model::RoutedExperts* routed) const;

  const model::DsparkDraft& draft_;
};

}  // namespace troupe::runtime
