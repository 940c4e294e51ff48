// `troupe bench serve --dataset-name agentic`: the multi-turn agentic workload of
// runtime/workload (the one `troupe bench replay` runs on the Engine) sent to a server.
// Turn k+1 of a conversation is its turn k's prompt + turn k's output ids + new user
// tokens, so a server with a prefix cache serves most input from it. The output ids come
// from the stream (vLLM's return_token_ids; a server without it fails every turn with a
// message saying so).
//
// Order, as bench replay's engine sees it: every conversation's turn 0 queues at the
// start, turn k+1 joins the back of the queue when turn k finishes, and C workers send
// the front of the queue, so at most C requests are in flight.
#pragma once

#include "bench/serve/serve_bench.h"
#include "runtime/workload/agentic_workload.h"

namespace troupe::bench {

// Uses config.base, model and max_concurrency; requests[conversation · turns + turn].
// A failed turn ends its conversation (its later turns fail as "not sent").
ServeBenchRun run_multi_turn_bench(const ServeBenchConfig& config,
                                   const runtime::AgenticWorkloadConfig& workload);

}  // namespace troupe::bench
