// DEP-R: the ranks of an instance step in lockstep, so a step takes as long as its slowest
// rank, drafts or not (a rank that drafts nothing still joins the draft's MoE exchanges).
// A cost table per rank would time its own k against the others' and learn from its own
// requests' drafts only, and the ranks' choices would drift apart. So the ranks choose one
// draft limit: each contributes a summary of its step to the DP sync, and every rank feeds
// its own online cost table (draft_length.h) the same reduced summaries in the same order,
// so every rank's table, and the k it chooses, is the same.
//
//   rank r contributes (summarize)     reduced (reduce_summaries)
//   limit: its plan's draft limit      max
//   decodes                            sum: the group's batch
//   timed: no prefill or fork in it    and: the time is the decodes' alone on every rank
//   seconds: its run time              max: the lockstep step's
//   verified[d * (kmax+1) + a]:        elementwise sum: the group's drafts, counted by
//     its chunks that drafted d and      (drafted, accepted), observed in one fixed order
//     had a accepted
//   running: requests running now      sum: the batch the next choice is for
//
// Pure logic, with the cost table's own types; the StepPipeline applies the group's summary
// (StepPipeline::agree_draft_length).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/speculative/draft_length.h"

namespace troupe::runtime {

struct DraftStepSummary {
  int64_t limit = 0;
  int64_t decodes = 0;
  bool timed = true;
  double seconds = 0;
  std::vector<int64_t> verified;  // empty: no drafts (or no adaptive speculation)
  int64_t running = 0;

  bool operator==(const DraftStepSummary&) const = default;
};

// A rank's step as the group sees it (kmax: the configured num_speculative_tokens); a
// rank that ran a dummy step or none passes a default outcome with its seconds.
DraftStepSummary summarize(const StepOutcome& step, int64_t kmax, int64_t running);

// The reduction (associative and commutative; an empty `verified` counts as zeros).
// Throws troupe::Error for histograms of different kmax.
DraftStepSummary reduce_summaries(const DraftStepSummary& a, const DraftStepSummary& b);

// The group's step as one outcome for DraftLengthChooser::observe, into `out` (its drafts'
// buffer reused): k the most any chunk drafted, the drafts in (drafted, accepted) order.
// Throws troupe::Error for a histogram that is not (kmax + 1)^2 long or a count outside
// [0, kMaxGroupDrafts] (it came over the wire).
void group_outcome(const DraftStepSummary& s, int64_t kmax, StepOutcome& out);

// Drafts one cell of a group's step may count: far above R * max-num-seqs.
constexpr int64_t kMaxGroupDrafts = int64_t{1} << 24;

}  // namespace troupe::runtime
