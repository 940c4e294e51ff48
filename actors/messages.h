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
// An instance of R > 1 ranks (DEP-R, --data-parallel-size) has R schedulers and R ranks.
// The supervisor sends a new request to the rank chosen by runtime::choose_rank (it asks
// every scheduler for its load and cached prefix: probe). With expert parallelism the
// ranks step in lockstep: before each step the schedulers agree on its metadata by a
// recursive-doubling all-reduce (runtime/collectives), whose messages they send each
// other directly (dpsync), and a rank with nothing to run gets an empty plan (a dummy
// step that joins the MoE exchanges with zero rows).
//
//   supervisor --probe--> scheduler r (x R) --RankLoad--> supervisor --generate--> chosen
//   scheduler r --dpsync(CollectiveMessage<StepMetadata>)--> scheduler q   (per round)
//   scheduler r --dpwake(step)--> scheduler q   (r will wait for q's value before it
//                                                sends q one: an idle q must join first)
//
// Live EPLB (--enable-eplb, expert parallel): every step's result carries the rank's
// per-layer, per-logical-expert token counts; its scheduler sends them to the instance's
// planner, which sums the R ranks' counts of each step into a sliding window and every
// step_interval steps plans a new placement. The planner sends it to every scheduler,
// which hands it to its rank; the rank copies its new slots' weights on a thread of its
// own (decoding goes on) and says so in its next results (placement_ready). The DP-sync
// all-reduce takes the min over ranks, so the first step whose agreed min reaches the
// new epoch carries it in every rank's plan (StepPlan::placement_epoch): all ranks
// switch at that step.
//
//   scheduler r --eplb(ExpertCounts)--> planner --stage(PlacementUpdate)--> scheduler r
//   scheduler r --stage--> rank r --(copy thread)--> staged(StagedPlacement) --> rank r
//
// The node's Engram owner (actors/engram_owner_actor.cpp) holds the Engram tables in one
// shared host mapping that every rank reads in place; each scheduler sends it every plan
// as it goes to the rank, and the owner brings that step's table rows in (their ids
// depend on token ids only) while the ranks still run the step before.
//
//   scheduler r --prefetch(StepPlan)--> engram owner       (no answer; never on a rank)
//
// A cluster (docs/cluster.md): the router node's cluster router holds the engines of the
// other nodes as remote handles (CAF middleman); they stream tokens back to it, and it to
// the client, so it can end a lost engine's requests with an error.
//
//   client --generate--> cluster router --generate(reply_to: router)--> remote supervisor
//   remote scheduler --token--> cluster router --token--> client
//   cluster router --dial--> itself   (every 0.5 s until a remote engine answers)
//
// An expert-parallel instance whose ranks are processes of their own (docs/cluster.md):
// each rank process runs a supervisor of one rank. Each incarnation forms a group: the
// rank's forming thread makes its UCX worker (the MoE data plane, runtime/dep/ucx) and
// hands its address to its supervisor, which joins at the group's leader (rank 0's
// supervisor, on rank 0's node's control port) with that address and its scheduler. Once
// all R have joined, the leader answers every join with every address and scheduler
// (GroupFormed); the thread connects the UCX group, and the supervisor gives its rank the
// communicator and its scheduler the peers (DP sync goes scheduler to scheduler over CAF,
// as in one process). Each supervisor monitors the other ranks' schedulers: when one goes
// away (its process died or its incarnation ended) it ends its own incarnation and joins
// again, so a restarted rank process rejoins the others.
//
//   forming thread --address(incarnation, bytes)--> supervisor r --join(GroupJoin)--> leader
//   leader --GroupFormed (once all R joined)--> supervisor r --> forming thread (connect)
//   forming thread --formed(incarnation, error)--> supervisor r
//   supervisor r --group(communicator)--> rank r;  --peers(DpPeers)--> scheduler r
//
// KV hand-off (P/D disaggregation, drain; docs/pd.md): a request with kv_hand_off_after
// parks after that many tokens (its event says HandedOff); whoever routes it tells its
// engine where to move it. The rank packs the KV after every step sent before, the
// target's scheduler checks and queues it, and the sender releases the blocks when the
// target answers, or fails the request when it refuses or does not answer in the lease.
//
//   client --handoff(id, target)--> supervisor --> scheduler --export(KvExport)--> rank
//   rank --KvHandoffBytes--> scheduler --import(GenerateRequest, bytes, client)--> target
//   target --"" or why--> scheduler (release);  target scheduler --token--> client
//
// The hop "import --> target" is the instance's KV transfer agent (actors/kv_agent.cpp,
// docs/pd.md "The transfer agent"): with UCX on both sides the region goes by one RMA put
// into memory the target's agent registered, and only the rest travels in messages:
//
//   scheduler --kvpush(request, KvHandoffValue, target, client)--> agent A
//   agent A --kvreserve(bytes)--> target supervisor --> agent B --KvLease--> agent A
//   agent A ==put region, flush==> B's staging memory (UCX; B's lease frees it if no commit)
//   agent A --kvcommit(lease, request, header, client)--> target --> agent B
//     (or, its put failed or timed out: --kvrelease(lease)--> target --> agent B)
//   agent B --import(request, KvHandoffValue, client)--> B's supervisor --> scheduler
//   "" or why --> agent B --> agent A --> scheduler A
//
// Without UCX on either side (lease 0) agent A sends import(request, bytes, client).
//
// CAF 0.17 (Debian): atoms are atom_constant with at most 10 characters. The payloads
// that may cross a process have inspect() functions and type IDs (actors/wire.h,
// included at the end of this file); the rest are local-only
// (CAF_ALLOW_UNSAFE_MESSAGE_TYPE below): a plan and its result go between a scheduler and
// its rank in one process, and a staged placement points at this process's weights.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/step_metadata.h"
#include "runtime/dep/rank_choice.h"
#include "runtime/dep/slot_weights.h"
#include "runtime/eplb/expert_placement.h"
#include "runtime/kv_transfer/kv_handoff.h"
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
using probe_atom = caf::atom_constant<caf::atom("probe")>;        // a rank's load and prefix
using dpsync_atom = caf::atom_constant<caf::atom("dpsync")>;      // one all-reduce message
using dpwake_atom = caf::atom_constant<caf::atom("dpwake")>;      // join step N's all-reduce
using peers_atom = caf::atom_constant<caf::atom("peers")>;        // the instance's schedulers
using eplb_atom = caf::atom_constant<caf::atom("eplb")>;          // a step's expert counts
using stage_atom = caf::atom_constant<caf::atom("stage")>;        // copy a new placement's slots
using staged_atom = caf::atom_constant<caf::atom("staged")>;      // that copy is done
using prefetch_atom = caf::atom_constant<caf::atom("prefetch")>;  // a planned step's Engram rows
using dial_atom = caf::atom_constant<caf::atom("dial")>;          // (re)connect a remote engine
using join_atom = caf::atom_constant<caf::atom("join")>;          // a rank joins its group
using address_atom = caf::atom_constant<caf::atom("address")>;    // the UCX worker's address
using formed_atom = caf::atom_constant<caf::atom("formed")>;      // the UCX group connected
using group_atom = caf::atom_constant<caf::atom("group")>;        // a rank's communicator
using handoff_atom = caf::atom_constant<caf::atom("handoff")>;    // move a parked request
using import_atom = caf::atom_constant<caf::atom("import")>;      // continue a moved request
using export_atom = caf::atom_constant<caf::atom("export")>;      // pack a parked request's KV
using park_atom = caf::atom_constant<caf::atom("park")>;          // drain: park a running request
using drain_atom = caf::atom_constant<caf::atom("drain")>;        // move an instance's requests away
using kvpush_atom = caf::atom_constant<caf::atom("kvpush")>;      // agent: move a hand-off
using kvreserve_atom = caf::atom_constant<caf::atom("kvreserve")>;  // agent: staging for a put
using kvcommit_atom = caf::atom_constant<caf::atom("kvcommit")>;  // agent: the put has landed
using kvpoll_atom = caf::atom_constant<caf::atom("kvpoll")>;      // agent: progress its transport
using kvrelease_atom = caf::atom_constant<caf::atom("kvrelease")>;  // agent: a lease given up

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
// A request's KV hand-off as bytes (runtime/kv_transfer/kv_handoff_wire.h): its tokens,
// text state and one region of its KV.
struct KvHandoffBytes {
  std::vector<uint8_t> bytes;
  // In an import: the sender gives up on the move this long after sending it (its
  // lease's rest), so a receiver that takes it later drops it; 0: no lease (the router's
  // recompute, whose wait is its own).
  int64_t lease_ms = 0;
};

struct TokenEvent {
  runtime::RequestOutput output;
  // Status HandedOff: the request's tokens and text state without KV, so whoever moves
  // it can have it recomputed elsewhere even if its engine is lost mid-move (docs/pd.md).
  KvHandoffBytes resume;
};

// A rank's answer to run(StepPlan): the sampled tokens (and logprobs) of each chunk.
struct StepResult {
  std::vector<runtime::SampledChunk> sampled;  // [plan.chunks.size()]
  std::string error;       // non-empty: the step failed; its requests are finished with it
  double run_seconds = 0;  // wall time the rank spent on the step
  int64_t rank_step = 0;   // the rank's own 1-based count of steps run (for logs)
  // Live EPLB only: [L, Nlog] tokens the rank routed to each logical expert in the step
  // (empty: none), and the newest placement epoch the rank has copied its slots for.
  std::vector<int64_t> expert_counts;
  int64_t placement_ready = 0;
  // The same for the DSpark draft's MoE when it is expert-parallel ([S, nEd]).
  std::vector<int64_t> draft_expert_counts;
  int64_t draft_placement_ready = 0;
};

// A step's expert counts from one rank (scheduler -> planner). epoch: the placement the
// step ran on. draft: the DSpark draft's MoE (its own window and placements), else the
// target's.
struct ExpertCounts {
  int rank = 0;
  int64_t step = 0;  // the group's step id (DP sync)
  int64_t epoch = 0;
  std::vector<int64_t> counts;  // [L, Nlog]; empty: nothing routed
  bool draft = false;
};

// A new placement (planner -> schedulers -> ranks), numbered 1, 2, ... per incarnation,
// with the planner's balance figures of its window (MODEL.md §9), per layer.
struct PlacementUpdate {
  int64_t epoch = 0;
  std::shared_ptr<const runtime::eplb::ExpertPlacement> placement;
  int64_t planned_at = 0;  // the planner's step count
  double balance_before = 0, balance_after = 0;  // means over layers
  bool draft = false;  // the DSpark draft's placement (numbered apart), else the target's
};

// A rank's copy of its slots' weights for a placement, made off its step thread.
struct StagedPlacement {
  PlacementUpdate update;
  std::shared_ptr<const runtime::SlotWeights> weights;
};

// One message of the schedulers' per-step all-reduce (DP sync).
using DpSyncMessage = runtime::collectives::CollectiveMessage<runtime::collectives::StepMetadata>;

// What a scheduler's DP-sync peers send it: one all-reduce message. In rank order, its
// own included; across processes, remote handles (the middleman carries them).
using dp_peer_actor = caf::typed_actor<caf::reacts_to<dpsync_atom, DpSyncMessage>,
                                        caf::reacts_to<dpwake_atom, int64_t>>;
using DpPeers = std::vector<dp_peer_actor>;  // [R]

// A rank of an instance spread over processes joins its group's leader (join_atom), once
// per incarnation (a join replaces one of the same rank that was still waiting: that
// rank's process restarted, or its join timed out and came again).
struct GroupJoin {
  std::string instance;
  int32_t rank = 0;
  int32_t size = 0;
  std::vector<uint8_t> address;  // runtime/dep/peer_address.h, encoded
  dp_peer_actor scheduler;       // this incarnation's scheduler, for the peers' DP sync
};

// The leader's answer to every join once all `size` ranks have joined.
struct GroupFormed {
  int64_t generation = 0;  // the leader's count of groups formed
  std::vector<std::vector<uint8_t>> addresses;  // [R]
  DpPeers schedulers;                           // [R]
};

// What a scheduler asks its rank to pack (export_atom): a parked request's hand-off
// without its bytes, and where they are in the rank's storage.
struct KvExport {
  runtime::KvHandoff header;
  std::vector<int32_t> table;
  int32_t slot = -1;
};

// A hand-off as a value between actors of one process: the rank's packed KV for the
// transfer agent (export_atom's answer), and the hand-off whose region an RMA put
// brought, for the receiving scheduler (import_atom).
struct KvHandoffValue {
  runtime::KvHandoff h;
  // In an import: by then the sender has given up on the move (counted from when this
  // process first heard of it, so never before the sender does); the receiving scheduler
  // drops it when it comes later. max(): no lease.
  std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::time_point::max();
};

// A receiving agent's answer to kvreserve: where the sender puts a region of that many
// bytes, under lease `lease`. lease 0: not by RMA here (no UCX on this side, or `why`:
// its staging memory is full); the sender sends the whole hand-off in a message instead.
struct KvLease {
  uint64_t lease = 0;
  std::vector<uint8_t> address;  // the receiver's UCP worker
  uint64_t remote_address = 0;
  std::vector<uint8_t> rkey;
  std::string why;
};

// What the Engram owner has done (stats_atom to it), for tests and logs.
struct EngramOwnerFigures {
  int64_t plans = 0;          // plans it was sent
  int64_t rows = 0;           // table rows it brought in
  int64_t skipped_positions = 0;  // positions of a placeholder token (async decode): unknown rows
  int64_t table_bytes = 0;    // codes + scales of every table in the mapping
};

// probe_atom answers with runtime::RankLoad (runtime/dep/rank_choice.h): the scheduler's
// running + waiting requests, how much of the probed prompt its KV holds in any tier, and
// (probed with a name) whether it holds that saved prefix (KV save by name).

// stats_atom answers with runtime::EngineFigures (runtime/step/engine_figures.h): the
// one struct of engine figures every reader shares.

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::StepPlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StagedPlacement)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::KvExport)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::KvHandoffValue)

#include "actors/wire.h"  // inspect() and type IDs of the payloads that may cross a process
