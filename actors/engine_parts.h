// The pieces of an engine instance behind the supervisor (actors/engine_actors.h), for
// the actor files that implement them; not part of the public interface.
#pragma once

#include <caf/all.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>

#include "actors/engine_actors.h"
#include "kernels/check.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/eplb/counts_trace.h"
#include "runtime/eplb/eplb_planner.h"
#include "runtime/eplb/expert_placement.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"

namespace troupe::actors {

// The scheduler as the supervisor drives it: generate is acknowledged, so a request the
// scheduler never saw (still in its mailbox when it died) comes back to the supervisor
// as an error and is failed there; timeout comes from the scheduler's own timers; probe
// (with the saved prefix a request names, if any), dpsync and peers serve an instance of
// R > 1 ranks (messages.h); handoff and import
// move a parked request with its KV to another engine (docs/pd.md).
using scheduler_core_actor =
    caf::typed_actor<caf::replies_to<generate_atom, GenerateRequest, caf::actor>::with<bool>,
                     caf::reacts_to<abort_atom, runtime::RequestId>,
                     caf::reacts_to<fail_atom, runtime::RequestId, std::string>,
                     caf::replies_to<stats_atom>::with<runtime::EngineFigures>,
                     caf::reacts_to<timeout_atom, runtime::RequestId>,
                     caf::replies_to<probe_atom, std::vector<int32_t>>::with<runtime::RankLoad>,
                     caf::replies_to<probe_atom, std::vector<int32_t>, std::string>::with<runtime::RankLoad>,
                     caf::reacts_to<dpsync_atom, DpSyncMessage>,
                     caf::reacts_to<dpwake_atom, int64_t>,
                     caf::reacts_to<peers_atom, DpPeers>,
                     caf::reacts_to<stage_atom, PlacementUpdate>,
                     caf::replies_to<handoff_atom, runtime::RequestId, caf::actor>::with<std::string, KvHandoffBytes>,
                     caf::reacts_to<park_atom, runtime::RequestId>,
                     caf::replies_to<import_atom, GenerateRequest, KvHandoffBytes, caf::actor>::with<std::string>,
                     caf::replies_to<import_atom, GenerateRequest, KvHandoffValue, caf::actor>::with<std::string>>;

// The instance's live-EPLB planner (actors/eplb_planner_actor.cpp): each scheduler sends
// it every step's expert counts; it sends new placements to the schedulers (messages.h).
using Schedulers = std::vector<scheduler_core_actor>;  // [R], in rank order
// The supervisor: the engine's handle for its clients, and for the other rank processes
// of an instance spread over processes the group's join point (rank 0's supervisor is
// the leader) and the target of its forming thread's reports (messages.h).
using supervisor_actor = scheduler_actor::extend<
    caf::replies_to<probe_atom, std::vector<int32_t>>::with<runtime::RankLoad>,
    caf::replies_to<handoff_atom, runtime::RequestId, caf::actor>::with<std::string, KvHandoffBytes>,
    caf::reacts_to<park_atom, runtime::RequestId>,
    caf::replies_to<import_atom, GenerateRequest, KvHandoffBytes, caf::actor>::with<std::string>,
    caf::replies_to<import_atom, GenerateRequest, KvHandoffValue, caf::actor>::with<std::string>,
    caf::replies_to<kvreserve_atom, uint64_t>::with<KvLease>,
    caf::replies_to<kvcommit_atom, uint64_t, GenerateRequest, KvHandoffBytes, caf::actor>::with<std::string>,
    caf::reacts_to<kvrelease_atom, uint64_t>,
    caf::replies_to<join_atom, GroupJoin>::with<GroupFormed>,
    caf::reacts_to<address_atom, int64_t, std::vector<uint8_t>>,
    caf::reacts_to<formed_atom, int64_t, std::string>, caf::reacts_to<dial_atom, uint64_t>>;

// The instance's KV transfer agent (actors/kv_agent.cpp, docs/pd.md "The transfer
// agent"): it moves its schedulers' parked requests to other
// engines (kvpush: by one RMA put of the region where both sides have UCX, else in a
// message) and receives theirs (kvreserve, kvcommit: staging memory under a lease, then
// the hand-off goes to the instance's scheduler as an import). Answers "" once the
// receiver has the request, else why not (or the error: timeout, receiver down).
using kv_agent_actor = caf::typed_actor<
    caf::replies_to<kvpush_atom, GenerateRequest, KvHandoffValue, caf::actor, caf::actor>::with<std::string>,
    caf::replies_to<kvreserve_atom, uint64_t>::with<KvLease>,
    caf::replies_to<kvcommit_atom, uint64_t, GenerateRequest, KvHandoffBytes, caf::actor>::with<std::string>,
    caf::reacts_to<kvrelease_atom, uint64_t>, caf::reacts_to<kvpoll_atom>>;

using eplb_planner_actor = caf::typed_actor<caf::reacts_to<eplb_atom, ExpertCounts>,
                                            caf::reacts_to<peers_atom, Schedulers>>;

// Starts with `placement` (epoch 0) for an instance of `ranks` ranks, and with
// `draft_placement` for the DSpark draft's MoE when it is expert-parallel (null: none);
// the schedulers come by peers_atom once they exist. config.enabled false: it plans
// nothing and only records. recorder: where every step's summed target counts go (null:
// nowhere).
eplb_planner_actor spawn_eplb_planner(
    caf::actor_system& sys, runtime::eplb::EplbConfig config,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> placement,
    std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement, int ranks,
    std::shared_ptr<runtime::eplb::CountsRecorder> recorder);

// What the transfer agent has done, read by the supervisor for the instance's figures
// (EngineFigures::kv_transfer_rma and the rest); atomics, as it runs on its own thread.
struct KvAgentCounters {
  std::atomic<int64_t> rma{0}, messages{0}, descriptors{0}, leases_expired{0};
  void add_to(runtime::EngineFigures& f) const {
    f.kv_transfer_rma += rma;
    f.kv_transfer_messages += messages;
    f.kv_transfer_descriptors += descriptors;
    f.kv_transfer_leases_expired += leases_expired;
  }
};

// Ends with its supervisor (linked). imports: where a received hand-off goes (the
// supervisor; held weakly). max_staging_bytes: what this side reserves at once for
// senders' puts. faults: kv-commit-drop, kv-put-hang (null: none). put_backoff: how long
// a receiver whose put timed out gets its hand-offs in messages first.
kv_agent_actor spawn_kv_agent(caf::actor_system& sys, caf::actor_addr imports,
                              std::shared_ptr<KvAgentCounters> counters,
                              std::shared_ptr<const runtime::FaultPlan> faults,
                              uint64_t max_staging_bytes, std::chrono::milliseconds put_backoff);

// What outlives one scheduler incarnation. The scheduler writes it while alive; the
// supervisor reads it only after the scheduler's exit message (so never concurrently):
// the clients of its unfinished requests, to end each with an error, and the cumulative
// counts, which the next incarnation continues so /metrics never goes backwards.
struct EngineLedger {
  std::unordered_map<runtime::RequestId, caf::actor> clients;  // unfinished request -> client
  runtime::EngineFigures counters;  // steps, preemptions, admitted, busy, failed, restarts, recent
  // Prefix-cache counts of the earlier incarnations (each KV manager counts from 0);
  // counters.prefix_* = these + the live manager's, as of its last step.
  int64_t prefix_query_base = 0;
  int64_t prefix_hit_base = 0;
  int64_t snapshot_hit_base = 0, replay_hit_base = 0, replay_token_base = 0;
  int64_t tier_hit_base[3] = {0, 0, 0};  // prefix hit tokens by tier (primary, host, disk)
  // Set by the scheduler before it quits because its rank failed, so the supervisor
  // names the rank even when the scheduler's exit arrives before the rank's.
  std::string death;
};

// A hand-off as the bytes a message carries (runtime/kv_transfer/kv_handoff_wire.h): the
// rank's packed KV, or a scheduler's tokens-only fallback.
inline KvHandoffBytes handoff_bytes(const runtime::KvHandoff& h) {
  const std::vector<std::byte> wire = runtime::encode_kv_handoff(h);
  const auto* p = reinterpret_cast<const uint8_t*>(wire.data());
  return KvHandoffBytes{std::vector<uint8_t>(p, p + wire.size())};
}

// An exit reason as text for clients and logs: the error's own message where it has one
// ("injected fault: rank-exit"), else CAF's rendering.
std::string describe(caf::actor_system& sys, const caf::error& reason);

// Where a rank sits in its instance.
struct RankSetup {
  int rank = 0;
  // Expert parallel: this rank's side of the group's exchange (an InProcessGroup's
  // communicator, which keeps its group alive, or a UcxCommunicator). Null and
  // comm_later: it comes by group_atom once the group has formed (ranks in processes of
  // their own), and the rank runs no step before. Null otherwise: every expert is here.
  std::shared_ptr<runtime::Communicator> comm;
  bool comm_later = false;
  std::shared_ptr<const runtime::eplb::ExpertPlacement> placement;  // expert parallel: the slots
  // Expert parallel with a drafter that has MoE layers (DSpark): the draft's own slots;
  // the rank runs the draft's MoE through the same exchange. Null: the draft's MoE is local.
  std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement;
  bool eplb = false;  // expert parallel: live EPLB (counts in every StepResult, staged placements)
  // The host and disk tiers' bytes (nullptr: none), shared with the rank's scheduler:
  // the rank runs the plans' tier copies, the scheduler adopts the disk files at its start.
  std::shared_ptr<runtime::TierStorage> tiers;
  const runtime::Drafter* drafter = nullptr;  // speculative decoding: the step's drafts
};

rank_actor spawn_rank(caf::actor_system& sys, const model::BatchForward& forward,
                      const runtime::KvCacheConfig& kv, const runtime::ExecutorOptions& options,
                      std::shared_ptr<const runtime::FaultPlan> faults, RankSetup setup = {});

// A scheduler's place in its instance: rank of size; lockstep (expert parallel, R > 1):
// it agrees on every step with its peers (peers_atom) and sends its rank a dummy step
// when it has nothing to run.
struct SyncSetup {
  int rank = 0;
  int size = 1;
  bool lockstep = false;
  eplb_planner_actor planner;  // live EPLB: where the step counts go; null: off
  bool draft_eplb = false;     // the draft's MoE too (its counts, placements: apart)
  engram_owner_actor engram;   // where its plans go for Engram prefetch; null: none
  kv_agent_actor agent;        // moves its parked requests to other engines
};

scheduler_core_actor spawn_scheduler(caf::actor_system& sys, const model::BatchForward& forward,
                                     const model::TextTokenizer* tokenizer,
                                     const runtime::EngineConfig& config,
                                     const runtime::KvCacheConfig& kv, rank_actor rank,
                                     std::shared_ptr<EngineLedger> ledger, double request_timeout,
                                     SyncSetup sync = {},
                                     std::shared_ptr<runtime::TierStorage> tiers = nullptr,
                                     std::shared_ptr<const runtime::FaultPlan> faults = nullptr);

// How logs and errors name a member of an instance: "rank" in a one-rank instance,
// "rank 2" in one of R.
inline std::string member_name(const char* what, int index, int size) {
  return size == 1 ? std::string(what) : std::string(what) + " " + std::to_string(index);
}

// Sends `id` a last TokenEvent: FinishedError with `why`.
void send_error(const caf::actor& client, runtime::RequestId id, std::string why,
                runtime::ErrorCause cause);

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Schedulers)
