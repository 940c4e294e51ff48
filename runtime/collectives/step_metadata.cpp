#include "runtime/collectives/step_metadata.h"

#include <algorithm>
#include <numeric>

#include "kernels/check.h"

namespace troupe::runtime::collectives {

int64_t StepMetadata::total_tokens() const {
  return std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
}

StepMetadata local_step_metadata(int32_t rank, int32_t ranks, int64_t step, int64_t tokens,
                                 bool has_work, int64_t placement_ready, bool failed,
                                 bool drafts, int64_t draft_placement_ready) {
  TROUPE_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "rank ", rank, " is not in [0, ", ranks,
               ")");
  StepMetadata m;
  m.step_min = m.step_max = step;
  m.tokens.assign(static_cast<size_t>(ranks), 0);
  m.tokens[rank] = tokens;
  m.any_work = has_work;
  m.placement_ready = placement_ready;
  m.any_failed = failed;
  m.any_draft = drafts;
  m.draft_placement_ready = draft_placement_ready;
  return m;
}

StepMetadata StepMetadataReduce::operator()(const StepMetadata& a, const StepMetadata& b) const {
  TROUPE_CHECK(a.tokens.size() == b.tokens.size(), "step metadata of ", a.tokens.size(), " and ",
               b.tokens.size(), " ranks cannot be reduced together");
  StepMetadata r;
  r.step_min = std::min(a.step_min, b.step_min);
  r.step_max = std::max(a.step_max, b.step_max);
  r.tokens.resize(a.tokens.size());
  for (size_t i = 0; i < r.tokens.size(); ++i) r.tokens[i] = a.tokens[i] + b.tokens[i];
  r.any_work = a.any_work || b.any_work;
  r.placement_ready = std::min(a.placement_ready, b.placement_ready);
  r.any_failed = a.any_failed || b.any_failed;
  r.any_draft = a.any_draft || b.any_draft;
  r.draft_placement_ready = std::min(a.draft_placement_ready, b.draft_placement_ready);
  r.draft_step = reduce_summaries(a.draft_step, b.draft_step);
  return r;
}

}  // namespace troupe::runtime::collectives
