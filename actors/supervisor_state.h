// The supervisor's state (actors/engine_supervisor.cpp), shared with the part that forms
// the group of an instance spread over processes (actors/group_member.cpp). Private to
// those two files.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "actors/engine_parts.h"

namespace troupe::runtime {
class UcxCommunicator;
class UcxGroupForming;
}  // namespace troupe::runtime

namespace troupe::actors {

using SupervisorClock = std::chrono::steady_clock;

// One rank of the current incarnation and its scheduler (null once its exit came).
struct Member {
  rank_actor rank;
  scheduler_core_actor scheduler;
};

struct SupervisorState {
  const model::BatchForward* forward = nullptr;
  const model::TextTokenizer* tokenizer = nullptr;
  runtime::EngineConfig config;
  runtime::KvCacheConfig kv;
  EngineOptions options;
  std::shared_ptr<const runtime::eplb::ExpertPlacement> placement;  // expert parallel only
  // Expert parallel with a drafter that has MoE layers: the draft's own placement.
  std::shared_ptr<const runtime::eplb::ExpertPlacement> draft_placement;
  std::vector<std::shared_ptr<EngineLedger>> ledgers;      // [R], across incarnations
  std::vector<Member> members;                             // [R], the incarnation now
  std::shared_ptr<runtime::InProcessGroup> group;          // its exchange (expert parallel)
  eplb_planner_actor planner;                              // its live-EPLB planner, or null
  kv_agent_actor agent;                                    // its KV transfer agent
  std::shared_ptr<KvAgentCounters> agent_counts = std::make_shared<KvAgentCounters>();  // across incarnations
  std::shared_ptr<runtime::eplb::CountsRecorder> counts;   // expert-counts-file, or null
  int64_t incarnation = 0;
  int ranks_ready = 0;    // of this incarnation, ranks that answered their ping
  std::string ending;     // non-empty: the incarnation is ending, why
  bool restart = false;   // when it has ended, start again (else down)
  std::deque<SupervisorClock::time_point> restarts;  // within options.restart_window_seconds
  std::string down;                        // non-empty: restarted too often, not serving
  // Ranks replaced while their own exit message may still be on its way: that message is
  // not the supervisor's own shutdown. The last few.
  std::deque<caf::actor_addr> retired;
  // R > 1: requests waiting to be routed, and whether one is being probed (route_next).
  std::deque<std::pair<GenerateRequest, caf::actor>> routing;
  bool probing = false;
  // Aborts that came while requests were being routed: no scheduler holds those yet, so
  // the abort follows the request to its scheduler (forward_generate). Cleared when
  // routing is idle (what is left was for requests routed before).
  std::unordered_set<runtime::RequestId> routing_aborts;
  // R > 1: hand-offs arriving, placed one at a time (instance_handoff.cpp): the front one
  // is being probed for; and the ids not yet at a scheduler (their aborts wait too).
  std::deque<std::function<void()>> import_queue;
  std::unordered_set<runtime::RequestId> placing_imports;

  // --- one rank of an instance spread over processes (options.member, group_member.cpp)
  std::shared_ptr<runtime::UcxGroupForming> forming;  // this incarnation's, until formed
  std::shared_ptr<runtime::UcxCommunicator> ucx;      // this incarnation's, once formed
  bool formed = false;                   // the rank has its communicator, the scheduler its peers
  std::vector<caf::actor_addr> watched;  // the other ranks' schedulers of this incarnation's group
  DpPeers peers;                         // the group's schedulers, the scheduler's once formed
  supervisor_actor leader;               // rank > 0: the leader's handle, once dialed
  std::vector<uint8_t> address;          // this incarnation's UCX worker address
  // The leader (rank 0): joins waiting for the rest of the group, by rank.
  struct Join {
    GroupJoin join;
    caf::typed_response_promise<GroupFormed> reply;
  };
  std::map<int32_t, Join> joins;
  int64_t generation = 0;  // groups formed

  int size() const { return options.data_parallel_size; }  // the ranks in this process
};

using supervisor_pointer = supervisor_actor::stateful_pointer<SupervisorState>;

// A member died or left: the whole incarnation ends (engine_supervisor.cpp). counted:
// towards max-engine-restarts (not when another process's rank went away: this one is
// fine and will serve again once that rank is back).
void end_incarnation(supervisor_pointer self, std::string why, bool counted = true);

// --- actors/instance_handoff.cpp: KV hand-offs to and from the instance's ranks
// Why the instance takes no hand-off now, or "" (down, restarting).
std::string handoffs_refused(const SupervisorState& st);
// Moves parked request id to `target` from whichever rank parked it (handoff_atom).
caf::result<std::string, KvHandoffBytes> route_handoff(supervisor_pointer self, runtime::RequestId id,
                                                       caf::actor target);
// A hand-off arriving (in bytes, or as a value from the transfer agent): to the rank
// choose_rank picks; "" once it has it, else why not.
caf::result<std::string> route_import(supervisor_pointer self, GenerateRequest& req,
                                      std::variant<KvHandoffBytes, KvHandoffValue> kv,
                                      caf::actor client);

// --- actors/group_member.cpp (options.member) --------------------------------------------
// After the incarnation's rank and scheduler are spawned: start forming its group.
void start_forming(supervisor_pointer self);
// The forming thread made its UCX worker: join the group's leader with its address.
void on_address(supervisor_pointer self, int64_t incarnation, std::vector<uint8_t> address);
// The leader: one rank's join; answered once every rank of the group has joined.
caf::result<GroupFormed> on_join(supervisor_pointer self, GroupJoin& join);
// A failed join is tried again (dial_atom with the incarnation).
void retry_join(supervisor_pointer self, int64_t incarnation);
// The forming thread is done: the group is connected (error empty) or it failed.
void on_formed(supervisor_pointer self, int64_t incarnation, const std::string& error);
// Whether a down message is about the group (a peer's scheduler, the leader, a pending
// join) and was handled.
bool on_group_down(supervisor_pointer self, const caf::down_msg& msg);
// The incarnation ends: the group's exchanges throw from now on, forming gives up.
void close_group(SupervisorState& s, const std::string& why);
// It has ended: forget the group (the next incarnation forms a new one).
void clear_group(supervisor_pointer self);

}  // namespace troupe::actors
