// The step loop, written once: plan steps (Scheduler::schedule) up to `depth` ahead, let
// the caller run each plan, and update the scheduler with each plan's samples in the
// order the plans were made. The Engine runs plans inline, the scheduler actor sends
// them to its rank, the scheduler tests hand them to a mocked model; all drive this.
//
//   StepPipeline pipe(scheduler, figures, async_scheduling ? 2 : 1);
//   std::vector<RequestOutput> out;
//   while (const StepPlan* plan = pipe.plan_next(out)) start_running(*plan);
//   ...                                                   // the oldest plan ran:
//   append(out, pipe.complete(sampled, run_seconds));
//
// Depth 2 is asynchronous scheduling: step N+1 is planned while step N runs (its decodes
// carry placeholders the executor fills in). Plans complete strictly oldest first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/function_ref.h"
#include "runtime/scheduler/scheduler.h"
#include "runtime/speculative/draft_length.h"
#include "runtime/speculative/draft_step_summary.h"
#include "runtime/step/engine_figures.h"

namespace troupe::runtime {

class StepPipeline {
 public:
  // scheduler and figures must outlive the pipeline; figures keeps counting from what it
  // holds (an actor restarted after a failure continues its predecessor's counts).
  // group_ranks: the ranks of the instance this pipeline is one rank of (DEP-R); with more
  // than one, an adaptive draft length is the group's (agree_draft_length), not this rank's.
  StepPipeline(Scheduler& scheduler, EngineFigures& figures, int depth, int group_ranks = 1);
  // Writes the cost table to its file (SchedulerConfig::speculation_table_file), if any.
  ~StepPipeline();
  StepPipeline(const StepPipeline&) = delete;
  StepPipeline& operator=(const StepPipeline&) = delete;

  // Plans the next step if fewer than `depth` plans are in flight and returns it, to be
  // run; it stays valid until complete() of it. Returns nullptr when the pipeline is full
  // or the plan came out empty: then the outputs of requests that finished outside a
  // step (aborts, failures) are appended to `outputs`, and no further plan is made now.
  const StepPlan* plan_next(std::vector<RequestOutput>& outputs);

  // The oldest plan in flight ran and sampled `sampled` ([plan.chunks.size()]).
  std::vector<RequestOutput> complete(std::span<const SampledChunk> sampled, double run_seconds);
  // The same, appending the outputs to `outputs`.
  void complete(std::span<const SampledChunk> sampled, double run_seconds,
                std::vector<RequestOutput>& outputs);
  // The oldest plan in flight threw: each of its requests ends with FinishedError
  // (cause StepFailed) saying `why`; the plan is then completed with no samples.
  std::vector<RequestOutput> complete_failed(const std::string& why, double run_seconds);

  // One step driven inline (the Engine, the scheduler tests): plans what there is room
  // for, runs the oldest plan with `run` (its wall time counts as rank busy time) and
  // completes it. Returns every output of the step.
  using RunPlan = std::function<std::vector<SampledChunk>(const StepPlan&)>;
  std::vector<RequestOutput> step(const RunPlan& run);
  // The low-latency form: `run` fills the pipeline's own sampled chunks, and `outputs`
  // (emptied first; pass the same vector every step) gets the step's outputs, whose
  // buffers come back from the outputs of the step before (Scheduler::recycle). The
  // plans, samples and outputs are built once and updated in place: a steady decode step
  // allocates nothing here.
  using RunPlanInto = kernels::FunctionRef<void(const StepPlan&, std::vector<SampledChunk>&)>;
  void step(RunPlanInto run, std::vector<RequestOutput>& outputs);

  const StepPlan& oldest() const { return plans_[head_]; }
  // DEP-R in one process (DepEngine): whether some rank of the group drafts this step, as
  // the group agreed it, written into the oldest plan before it runs
  // (StepPlan::draft_exchange; the scheduler actors carry it in the DP sync instead).
  void set_draft_exchange(bool any_draft) { plans_[head_].draft_exchange = any_draft; }
  int in_flight() const { return count_; }
  bool busy() const { return count_ > 0 || scheduler_.has_unfinished(); }
  // The online cost table (SchedulerConfig::adaptive_speculation), else nullptr.
  const DraftLengthChooser* draft_length() const { return chooser_.get(); }

  // DEP-R with an adaptive draft length (draft_step_summary.h): the ranks choose one k
  // from the group's steps. This rank's part: the summary of its last step, to send
  // (ran_plan: the plan complete() last finished, else a dummy step of `seconds`; running
  // 0: the caller sets it); then, on every rank alike, the group's reduction of an
  // earlier step's summaries, which the cost table learns from, and whose running
  // requests it chooses the next plans' k for.
  bool group_draft_length() const { return chooser_ != nullptr && group_ranks_ > 1; }
  DraftStepSummary step_summary(bool ran_plan, double seconds) const;
  void agree_draft_length(const DraftStepSummary& group);
  // Timed steps between writes of the cost table's file: a file write now and then, never
  // per step (the low-latency path allocates nothing per step).
  static constexpr int64_t kSaveEvery = 512;

 private:
  Scheduler& scheduler_;
  EngineFigures& figures_;
  int depth_;
  int group_ranks_;
  // Plans in flight, a ring of `depth` plans reused in place: count_ of them from head_,
  // planned and handed out, not completed; oldest first.
  std::vector<StepPlan> plans_;
  int head_ = 0, count_ = 0;
  std::unique_ptr<DraftLengthChooser> chooser_;
  void save_table();
  void learn(const StepOutcome& outcome);  // the cost table's part of a finished step
  int64_t timed_since_save_ = 0;  // decode-only steps the table learned since its last write
  bool save_failed_ = false;      // warned once
  StepOutcome outcome_;                // reused (its drafts' capacity)
  StepOutcome group_;                  // agree_draft_length's, reused
  std::vector<SampledChunk> sampled_;  // step()'s, reused
};

// The figures with the state fields filled in from the scheduler and its KV cache, and
// the KV cache's prefix counts added to counts' (which hold earlier incarnations', if any).
EngineFigures current_figures(const EngineFigures& counts, const Scheduler& scheduler,
                              const KvCacheManager& kv);

}  // namespace troupe::runtime
