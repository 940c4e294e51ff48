// What `troupe serve` and a cluster's engine node share: loading the model and spawning
// the engine instance's actors from a ServeConfig (engine options, the Engram owner, the
// DSpark drafter), with start-up lines on stdout.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <optional>
#include <string>

#include "actors/engine_actors.h"
#include "cli/served_model.h"
#include "config/serve_config.h"
#include "runtime/engram/engram_host_tables.h"
#include "runtime/faults/fault_plan.h"

namespace troupe::cli {

// "troupe: LINE" on stdout, flushed (tests and supervisors read these through a pipe).
void say(const std::string& line);

// The model of cfg.model (the built-in tiny one when empty; a .gguf file: a LLaMA-family
// model), with its load time said.
std::unique_ptr<ServedModel> load_serving_model(const config::ServeConfig& cfg);

// A running engine instance and what it uses; members must outlive the actors (destroy
// the actor system first).
struct ServingEngine {
  runtime::EngineConfig config;  // max_model_len clipped to the model's positions
  std::shared_ptr<runtime::EngramHostTables> engram;  // the node's one copy of the tables
  std::unique_ptr<DraftModel> draft;                  // speculative-config dspark
  std::shared_ptr<actors::InstanceHealth> health;
  actors::scheduler_actor engine;
};

// The faults to inject: the inject-faults key, else $TROUPE_INJECT_FAULTS (checked like
// the key: a bad spec stops start-up).
std::shared_ptr<const runtime::FaultPlan> fault_plan(const config::ServeConfig& cfg);

// Spawns the instance of cfg on `model`, or stops start-up with why its config cannot
// work (before any request could find out).
// member: this process runs one rank of an expert-parallel instance spread over
// processes (a cluster node; the system has the middleman).
std::unique_ptr<ServingEngine> start_engine(caf::actor_system& sys, const config::ServeConfig& cfg,
                                            const ServedModel& model,
                                            std::shared_ptr<const runtime::FaultPlan> faults,
                                            std::optional<actors::GroupMembership> member = {});

}  // namespace troupe::cli
