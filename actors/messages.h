// Every message the troupe actors exchange, in one place (DESIGN.md).
//
//   client --generate--> router --generate--> supervisor --generate--> scheduler --run--> rank
//      ^                                           (monitors both,           |  ^          |
//      |                                            restarts them)           |  +StepResult+
//      +-------------------------token(TokenEvent)---------------------------+
//
// The supervisor is the engine's stable handle: it forwards to the current scheduler,
// and when the scheduler or the rank dies it ends their requests with an error and
// starts both again (actors/engine_supervisor.cpp).
//
// CAF 0.17 (Debian): atoms are atom_constant with at most 10 characters. The payload
// types below are local-only for now (CAF_ALLOW_UNSAFE_MESSAGE_TYPE): they cross threads
// of one process, not the middleman; they get inspect() functions when ranks move to
// other processes.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/request.h"
#include "runtime/scheduler/step_plan.h"
#include "runtime/step/engine_figures.h"

namespace troupe::actors {

// --- atoms -------------------------------------------------------------------------------
using generate_atom = caf::atom_constant<caf::atom("generate")>;  // new request
using abort_atom = caf::atom_constant<caf::atom("abort")>;        // cancel a request
using fail_atom = caf::atom_constant<caf::atom("fail")>;          // end a request with an error
using token_atom = caf::atom_constant<caf::atom("token")>;        // streamed output
using run_atom = caf::atom_constant<caf::atom("run")>;            // execute a step plan
using stats_atom = caf::atom_constant<caf::atom("stats")>;        // engine snapshot
using ping_atom = caf::atom_constant<caf::atom("ping")>;          // is the rank up?
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;    // request-timeout fired

// --- payloads ----------------------------------------------------------------------------
// A request for one generation; outputs stream to `reply_to` as (token_atom, TokenEvent).
// With siblings (n > 1 choices) it is one group: the whole group goes to one engine,
// which prefills the prompt once and streams each member under its own id.
struct GenerateRequest {
  runtime::RequestId id = 0;
  std::vector<int32_t> prompt;
  runtime::RequestParams params;
  std::vector<runtime::Sibling> siblings;
};

// What a request produced since its last event; `output.finished()` marks the last one.
struct TokenEvent {
  runtime::RequestOutput output;
};

// A rank's answer to run(StepPlan): the sampled tokens (and logprobs) of each chunk.
struct StepResult {
  std::vector<runtime::SampledChunk> sampled;  // [plan.chunks.size()]
  std::string error;       // non-empty: the step failed; its requests are finished with it
  double run_seconds = 0;  // wall time the rank spent on the step
  int64_t rank_step = 0;   // the rank's own 1-based count of steps run (for logs)
};

// stats_atom answers with runtime::EngineFigures (runtime/step/engine_figures.h): the
// one struct of engine figures every reader shares.

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::GenerateRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::TokenEvent)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::EngineFigures)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::StepPlan)
