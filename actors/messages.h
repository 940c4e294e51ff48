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

// One planned (non-empty) step, as the scheduler saw it.
struct StepSample {
  int64_t step = 0;         // 1-based count of non-empty steps (EngineSnapshot::steps)
  int64_t admitted = 0;     // requests admitted by the step
  double plan_seconds = 0;  // wall time of Scheduler::schedule()
};

// The scheduler's state for health checks, metrics and tests. Counters are cumulative
// since the engine started; readers take differences.
struct EngineSnapshot {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t used_blocks = 0;  // ref > 0; 0 once every request finished (cached blocks are free)
  int64_t free_blocks = 0;
  double kv_usage = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t admitted = 0;             // admissions (a preempted request is admitted again)
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of those, served from it
  int64_t failed_steps = 0;         // steps the rank threw on (their requests failed)
  int64_t restarts = 0;             // times the supervisor restarted scheduler + rank
  // Wall seconds the rank spent running steps; its rate over wall time is how busy the
  // model is (the GPU-utilization figure; async scheduling removes the planning gaps).
  double rank_busy_seconds = 0;
  // The last steps (at most kMaxRecentSteps, oldest first), so a reader that polls less
  // often than every step can still observe each one: it keeps the last `step` it saw.
  std::vector<StepSample> recent_steps;
  static constexpr size_t kMaxRecentSteps = 4096;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::GenerateRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::TokenEvent)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::EngineSnapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::StepPlan)
