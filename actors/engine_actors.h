// The actors of one engine instance (DESIGN.md): a scheduler actor that owns the
// scheduling policy and KV bookkeeping, a rank actor (own thread) that owns the model
// executor and the KV bytes, and a router in front. Thin: each state struct delegates to
// runtime/. Typed interfaces list the messages each actor takes.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.h"
#include "model/forward.h"
#include "model/tokenizer.h"
#include "runtime/engine.h"

namespace troupe::actors {

using rank_actor =
    caf::typed_actor<caf::replies_to<run_atom, runtime::StepPlan>::with<StepResult>>;

using scheduler_actor =
    caf::typed_actor<caf::reacts_to<generate_atom, GenerateRequest, caf::actor>,
                     caf::reacts_to<abort_atom, runtime::RequestId>,
                     caf::replies_to<stats_atom>::with<EngineSnapshot>>;

using router_actor = scheduler_actor;  // same interface: it forwards to a scheduler

// Spawns the rank (detached: model compute never runs on CAF's shared workers) and the
// scheduler that drives it; the rank is linked to the scheduler and ends with it.
// forward and tokenizer (may be null) must outlive the actors.
scheduler_actor spawn_engine(caf::actor_system& sys, const model::Forward& forward,
                             const model::Tokenizer* tokenizer, runtime::EngineConfig config);

// Spreads requests over the schedulers of several engines (by request id; an n > 1 group
// by its leader's id, aborts to every engine).
router_actor spawn_router(caf::actor_system& sys, std::vector<scheduler_actor> engines);

}  // namespace troupe::actors
