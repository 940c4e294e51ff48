// EngineBridge on the engine actors (see engine_bridge.h). Also feeds the per-request
// metrics (time to first token, inter-token latency, e2e latency, finish reasons), and
// engine_state() refreshes the engine's gauges (running, waiting, KV usage and used blocks)
// and the scheduler's counts (preemptions, prefix cache, admitted per step, step time).
#pragma once

#include <memory>

#include "actors/engine_actors.h"
#include "net/http/engine_bridge.h"
#include "net/metrics/serving_metrics.h"

namespace troupe::net::http {

// `metrics` must outlive the bridge and its generations. `health`: the engine's (from
// EngineOptions), for unhealthy_reason(); null: always healthy.
std::unique_ptr<EngineBridge> make_engine_bridge(
    caf::actor_system& sys, actors::router_actor router, metrics::ServingMetrics& metrics,
    std::shared_ptr<const actors::InstanceHealth> health = nullptr);

}  // namespace troupe::net::http
