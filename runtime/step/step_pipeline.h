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
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/scheduler/scheduler.h"
#include "runtime/speculative/draft_length.h"
#include "runtime/step/engine_figures.h"

namespace troupe::runtime {

class StepPipeline {
 public:
  // scheduler and figures must outlive the pipeline; figures keeps counting from what it
  // holds (an actor restarted after a failure continues its predecessor's counts).
  StepPipeline(Scheduler& scheduler, EngineFigures& figures, int depth);

  // Plans the next step if fewer than `depth` plans are in flight and returns it, to be
  // run; it stays valid until complete() of it. Returns nullptr when the pipeline is full
  // or the plan came out empty: then the outputs of requests that finished outside a
  // step (aborts, failures) are appended to `outputs`, and no further plan is made now.
  const StepPlan* plan_next(std::vector<RequestOutput>& outputs);

  // The oldest plan in flight ran and sampled `sampled` ([plan.chunks.size()]).
  std::vector<RequestOutput> complete(std::span<const SampledChunk> sampled, double run_seconds);
  // The oldest plan in flight threw: each of its requests ends with FinishedError
  // (cause StepFailed) saying `why`; the plan is then completed with no samples.
  std::vector<RequestOutput> complete_failed(const std::string& why, double run_seconds);

  // One step driven inline (the Engine, the scheduler tests): plans what there is room
  // for, runs the oldest plan with `run` (its wall time counts as rank busy time) and
  // completes it. Returns every output of the step.
  using RunPlan = std::function<std::vector<SampledChunk>(const StepPlan&)>;
  std::vector<RequestOutput> step(const RunPlan& run);

  const StepPlan& oldest() const { return in_flight_.front(); }
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  bool busy() const { return !in_flight_.empty() || scheduler_.has_unfinished(); }
  // The online cost table (SchedulerConfig::adaptive_speculation), else nullptr.
  const DraftLengthChooser* draft_length() const { return chooser_.get(); }

 private:
  Scheduler& scheduler_;
  EngineFigures& figures_;
  int depth_;
  std::deque<StepPlan> in_flight_;  // planned and handed out, not completed; oldest first
  std::unique_ptr<DraftLengthChooser> chooser_;
};

// The figures with the state fields filled in from the scheduler and its KV cache, and
// the KV cache's prefix counts added to counts' (which hold earlier incarnations', if any).
EngineFigures current_figures(const EngineFigures& counts, const Scheduler& scheduler,
                              const KvCacheManager& kv);

}  // namespace troupe::runtime
