#include "runtime/dep/rank_step.h"

#include <exception>
#include <stdexcept>

namespace troupe::runtime {

std::vector<SampledChunk> run_rank_step(Executor& executor, ExpertParallel& experts,
                                        const StepPlan& plan, bool inject_throw,
                                        ExpertParallel* draft) {
  const int64_t begun = experts.steps_begun();
  try {
    if (inject_throw) {
      // The KV bookkeeping counts the plan's tier copies as done whatever the step does
      // (as Executor::run does them before any exchange), so a failed step runs them too.
      executor.apply_tier_ops(plan);
      throw std::runtime_error("injected fault: step-throw");
    }
    if (plan.placement_epoch > experts.epoch()) experts.use(plan.placement_epoch);
    if (draft && plan.draft_placement_epoch > draft->epoch()) draft->use(plan.draft_placement_epoch);
    return executor.run(plan);
  } catch (const std::exception& e) {
    if (experts.steps_begun() == begun) experts.begin_step();  // the step this rank missed
    experts.abort(e.what());
    throw;
  }
}

}  // namespace troupe::runtime
