// The actors of one engine instance (DESIGN.md): a supervisor (the instance's stable
// handle) that owns a scheduler actor (scheduling policy and KV bookkeeping) and a rank
// actor (own thread; the model executor and the KV bytes) per rank, and a router in
// front. Thin: each state struct delegates to runtime/. Typed interfaces list the
// messages each takes.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/instance_health.h"
#include "actors/messages.h"
#include "model/batch_forward.h"
#include "model/forward.h"
#include "model/tokenizer.h"
#include "runtime/dep/communicator.h"
#include "runtime/engine.h"
#include "runtime/engram/engram_host_tables.h"
#include "runtime/eplb/eplb_planner.h"
#include "runtime/faults/fault_plan.h"

// A rank's side of its group's exchange, handed over in its process (group_atom).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<troupe::runtime::Communicator>)

namespace troupe::actors {

using rank_actor = caf::typed_actor<caf::replies_to<run_atom, runtime::StepPlan>::with<StepResult>,
                                    caf::replies_to<ping_atom>::with<bool>,
                                    caf::reacts_to<group_atom, std::shared_ptr<runtime::Communicator>>,
                                    caf::reacts_to<stage_atom, PlacementUpdate>,
                                    caf::reacts_to<staged_atom, StagedPlacement>,
                                    caf::replies_to<export_atom, KvExport>::with<KvHandoffValue>>;

// The node's Engram owner (messages.h): prefetches the Engram table rows of the plans
// the schedulers send it; stats answers what it has done.
using engram_owner_actor =
    caf::typed_actor<caf::reacts_to<prefetch_atom, runtime::StepPlan>,
                     caf::replies_to<stats_atom>::with<EngramOwnerFigures>>;

// tables: the node's Engram tables, already adopted by `weights` (runtime/engram); both
// must outlive the actor.
engram_owner_actor spawn_engram_owner(caf::actor_system& sys, const model::ModelConfig& config,
                                      const model::ModelWeights& weights,
                                      std::shared_ptr<const runtime::EngramHostTables> tables);

// The engine as clients see it (the supervisor answers it, forwarding to its scheduler).
using scheduler_actor =
    caf::typed_actor<caf::reacts_to<generate_atom, GenerateRequest, caf::actor>,
                     caf::reacts_to<abort_atom, runtime::RequestId>,
                     // not the client's doing (shutdown): FinishedError with the reason
                     caf::reacts_to<fail_atom, runtime::RequestId, std::string>,
                     caf::replies_to<stats_atom>::with<runtime::EngineFigures>>;

using router_actor = scheduler_actor;  // same interface: it forwards to a scheduler

// A rank of an expert-parallel instance whose ranks are processes of their own
// (docs/cluster.md): this process runs rank `rank` of `size`. Each incarnation forms the
// group at its leader, rank 0's supervisor, published on leader_host:leader_port (rank 0
// leads itself); the MoE exchange goes over UCX (runtime/dep/ucx), DP sync over CAF.
struct GroupMembership {
  std::string instance;
  int rank = 0;
  int size = 1;
  std::string leader_host;
  uint16_t leader_port = 0;
};

// How the actors of an instance run, beyond the engine's own config.
struct EngineOptions {
  std::shared_ptr<const runtime::FaultPlan> faults;  // null: no injected faults
  std::shared_ptr<InstanceHealth> health;            // null: a private one
  double request_timeout = 0;  // seconds from arrival to the last token; 0: no limit
  // The supervisor restarts scheduler + rank after a death, at most this many times
  // within restart_window_seconds; past that the instance is down for good (config keys
  // max-engine-restarts, engine-restart-window).
  int max_restarts = 5;
  double restart_window_seconds = 60;
  // DEP-R (--data-parallel-size, --enable-expert-parallel): R ranks, each with its own
  // scheduler, requests and KV; with expert parallelism the routed experts are spread
  // over the ranks' slots (runtime/eplb's default placement, num_redundant_experts extra
  // slots) and the ranks step in lockstep; without it every rank holds every expert and
  // steps on its own. Kernel threads: the config's executor.kernel_threads per rank.
  int data_parallel_size = 1;
  bool expert_parallel = false;
  int64_t num_redundant_experts = 0;
  int64_t prefix_load_margin = 1;  // runtime::choose_rank's margin
  int fault_rank = 0;              // with R > 1, faults fire on this rank's steps only
  // After a KV put to a receiver times out, its hand-offs go in messages for this long
  // (doubling while it keeps timing out, up to 5 min), then RMA is tried again (kv_agent.cpp).
  std::chrono::milliseconds kv_put_backoff{10'000};
  // Live EPLB (--enable-eplb, --eplb-config; expert parallel only): a planner rebalances
  // the placement from the ranks' expert counts and the ranks switch in lockstep.
  runtime::eplb::EplbConfig eplb;
  // Expert parallel: every step's routing counts summed over the ranks, one JSON line per
  // step (expert-counts-file; runtime/eplb/expert_loads_json.h's format); empty: off.
  std::string expert_counts_file;
  // The node's Engram owner (spawn_engram_owner): every scheduler sends it its plans to
  // prefetch their Engram rows. Null: no prefetch (the ranks read the tables anyway).
  engram_owner_actor engram_owner;
  // --speculative-config (docs/dspark.md): every rank drafts with this drafter (required
  // when config.speculative is on; `forward` must then be made with the draft weights if
  // drafter->needs_features()). Shared by the ranks: propose() is const. Must outlive
  // the actors.
  const runtime::Drafter* drafter = nullptr;
  // Set: this process holds one rank of an instance spread over processes (then
  // data_parallel_size is 1, the ranks here, and expert_parallel is true); needs a system
  // with the middleman and the wire types, and a build with UCX.
  std::optional<GroupMembership> member;
};

// Checks the config against the model (the KV budget must hold max-num-seqs requests)
// and throws troupe::Error with the numbers if it cannot work; then spawns the
// supervisor, which spawns the rank (detached: model compute never runs on CAF's shared
// workers) and the scheduler that drives it. forward and tokenizer (may be null) must
// outlive the actors.
scheduler_actor spawn_engine(caf::actor_system& sys, const model::BatchForward& forward,
                             const model::TextTokenizer* tokenizer, runtime::EngineConfig config,
                             EngineOptions options = {});

// Spreads requests over the schedulers of several engines (by request id; an n > 1 group
// by its leader's id, aborts to every engine).
router_actor spawn_router(caf::actor_system& sys, std::vector<scheduler_actor> engines);

// What a cluster's router sends an engine (docs/pd.md): whole requests (mixed), or prompts
// whose requests it then moves with their KV to a decode engine.
enum class EngineRole : uint8_t { Mixed, Prefill, Decode };

// An engine of another node that a cluster's router dials over CAF's middleman
// (docs/cluster.md): published there by `troupe serve --node` at host:port.
struct ClusterEngineAddress {
  std::string name;  // "instance dp2 rank 0 on node rank0 (127.0.0.1:7101)"
  std::string host;
  uint16_t port = 0;
  // Non-empty: the engine is one rank of this expert-parallel instance spread over
  // processes, which serves only while every one of its ranks is up.
  std::string group;
  EngineRole role = EngineRole::Mixed;
  std::string instance;  // the cluster file's instance name (drain names it); "": `name`
};

// An engine in this process (spawn_engine), under a cluster router.
struct LocalEngine {
  std::string name;
  scheduler_actor engine;
  std::string group;  // as ClusterEngineAddress::group
  EngineRole role = EngineRole::Mixed;
  std::string instance;  // as ClusterEngineAddress::instance
};

// The router of a cluster's router node (actors/cluster_router.cpp): dials every remote
// engine until it answers and again after it went away, ends a lost engine's requests
// with an error (EngineDied), sends a new request to the up engine with the fewest in
// flight (an engine of a group only while its whole group is up), and keeps `health`
// 503 naming the engines not up until all are. The system
// must have loaded the middleman with the wire types (actors/wire.h).
router_actor spawn_cluster_router(caf::actor_system& sys, std::vector<ClusterEngineAddress> remote,
                                  std::vector<LocalEngine> local,
                                  std::shared_ptr<InstanceHealth> health);

}  // namespace troupe::actors
