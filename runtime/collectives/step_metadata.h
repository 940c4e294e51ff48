// What the R schedulers of an instance agree on before each step (DP sync, DESIGN.md
// "Scale-out"): every rank contributes its own StepMetadata and all get the reduction, by
// an all-reduce (all_reduce.h) whose epoch is the step id.
//
//   rank r contributes               reduced (StepMetadataReduce)
//   step_min = step_max = its step   min / max: the group agrees iff they are equal
//   tokens[r] = its tokens, else 0   elementwise sum: tokens[q] = rank q's tokens
//   any_work                         or: every rank steps (a dummy step if it has none)
//   placement_ready                  min: the newest expert placement all ranks can switch to
//   any_failed                       or: some rank's last step threw; the group stops
//   any_draft                        or: some rank drafts, so every rank joins the
//                                    expert-parallel draft's MoE exchanges
//   draft_placement_ready            min: placement_ready of the draft's own placement
//   draft_step                       reduce_summaries: with an adaptive draft length, an
//                                    earlier step of every rank and its running requests,
//                                    from which all ranks choose the same k
//                                    (runtime/speculative/draft_step_summary.h)
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/speculative/draft_step_summary.h"

namespace troupe::runtime::collectives {

struct StepMetadata {
  int64_t step_min = 0;         // the lowest step id any rank is at
  int64_t step_max = 0;         // the highest; == step_min when the ranks are in lockstep
  std::vector<int64_t> tokens;  // [R] tokens each rank schedules this step
  bool any_work = false;        // some rank has a request running or waiting
  int64_t placement_ready = 0;  // min over ranks of the newest placement version copied in
  bool any_failed = false;      // some rank's previous step failed
  bool any_draft = false;       // some rank's plan asks for drafts (StepPlan::drafts)
  int64_t draft_placement_ready = 0;  // min over ranks, the draft's placement
  DraftStepSummary draft_step;        // adaptive speculation: the group's draft-length inputs

  bool agreed() const { return step_min == step_max; }
  int64_t total_tokens() const;

  bool operator==(const StepMetadata&) const = default;
};

// Rank `rank` of `ranks`: its own contribution (tokens[rank] = tokens, the rest 0).
StepMetadata local_step_metadata(int32_t rank, int32_t ranks, int64_t step, int64_t tokens,
                                 bool has_work, int64_t placement_ready = 0, bool failed = false,
                                 bool drafts = false, int64_t draft_placement_ready = 0);

// The reduction of two contributions (associative, commutative). Throws troupe::Error when
// the token vectors differ in size (contributions of groups of different R).
struct StepMetadataReduce {
  StepMetadata operator()(const StepMetadata& lower, const StepMetadata& higher) const;
};

}  // namespace troupe::runtime::collectives
