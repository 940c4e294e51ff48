#include "runtime/dep/rank_step.h"

#include <exception>
#include <stdexcept>

namespace troupe::runtime {

std::vector<SampledChunk> run_rank_step(Executor& executor, ExpertParallel& experts,
                                        const StepPlan& plan, bool inject_throw,
                                        ExpertParallel* draft) {
  const int64_t begun = experts.steps_begun();
  try {
    if (inject_throw) throw std::runtime_error("injected fault: step-throw");
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
