// Drives a Scheduler with a mocked model on the StepPipeline the engine and the actors
// use: schedule, execute, update - synchronously, or asynchronously with step N+1 planned
// before step N's samples are known (its decodes carry placeholders the execute callback
// fills in).
// Collects every plan that ran and each request's tokens, finish reason and cached count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/scheduler/scheduler.h"
#include "runtime/step/step_pipeline.h"

namespace troupe::runtime {

struct PlanDriver {
  // The mocked model: one SampledChunk per chunk of the plan.
  using Execute = std::function<std::vector<SampledChunk>(const StepPlan&)>;

  PlanDriver(const KvCacheConfig& kv_config, int64_t max_num_batched_tokens, bool async)
      : async(async),
        kv(kv_config),
        s(scheduler_config(max_num_batched_tokens), kv, 1),
        pipeline(s, figures, async ? 2 : 1) {}

  static SchedulerConfig scheduler_config(int64_t max_num_batched_tokens) {
    SchedulerConfig c;
    c.max_num_batched_tokens = max_num_batched_tokens;
    return c;
  }

  // Steps until nothing is unfinished or in flight, at most max_steps times; hook(step)
  // runs before each step's plan is made (to abort requests mid-run).
  void run(const Execute& execute, int64_t max_steps,
           const std::function<void(int64_t)>& hook = {}) {
    for (int64_t n = 0; pipeline.busy() && n < max_steps; ++n) {
      if (hook) hook(n);
      const auto out = pipeline.step([&](const StepPlan& plan) {
        plans.push_back(plan);
        return execute(plan);
      });
      for (const RequestOutput& o : out) {
        outputs[o.id].insert(outputs[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished()) reasons[o.id] = std::string(o.finish_reason());
        cached[o.id] = o.num_cached_tokens;
      }
      kv.check_invariants();
    }
  }

  bool async;
  KvCacheManager kv;
  Scheduler s;
  EngineFigures figures;
  StepPipeline pipeline;
  std::vector<StepPlan> plans;  // in the order they ran
  std::map<RequestId, std::vector<int32_t>> outputs;
  std::map<RequestId, std::string> reasons;
  std::map<RequestId, int64_t> cached;  // the last output's num_cached_tokens
};

}  // namespace troupe::runtime
