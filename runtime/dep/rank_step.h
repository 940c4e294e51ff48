// One step of an expert-parallel rank, shared by DepEngine and the rank actor: it
// switches to the plan's expert placement when that is newer (live EPLB: every rank at
// the same step), and the executor runs the plan (an empty plan is a dummy step that joins every exchange with
// zero rows). A throw anywhere in the step aborts it on the whole group, so no peer
// waits for this rank: after joining the step first when the executor had not got that
// far, since an abort fails the step the rank is in (runtime/dep/in_process_group.h).
#pragma once

#include <vector>

#include "runtime/dep/expert_parallel.h"
#include "runtime/executor/executor.h"

namespace troupe::runtime {

// inject_throw: an injected fault (runtime/faults) throws as the step starts. Rethrows
// what the step threw, after the abort. draft: the draft's MoE expert-parallel (its own
// placement epochs: StepPlan::draft_placement_epoch), or null.
std::vector<SampledChunk> run_rank_step(Executor& executor, ExpertParallel& experts,
                                        const StepPlan& plan, bool inject_throw = false,
                                        ExpertParallel* draft = nullptr);

}  // namespace troupe::runtime
