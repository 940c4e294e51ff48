// The scheduler actor: plans steps (runtime::Scheduler), sends them to the rank, streams
// each request's outputs to its client. A failed step fails its requests with the
// rank's error; request-timeout fails a request that runs too long. Its clients and
// counts live in the EngineLedger so the supervisor can end them if this actor dies.
//
// In lockstep (one of R expert-parallel ranks) every step is agreed first: the
// scheduler plans (possibly nothing), starts the step's all-reduce of StepMetadata with
// its peers (DP sync), and once it completes sends its rank the plan, or an empty plan
// (a dummy step) when only peers have work. It starts a step's all-reduce when it has a
// plan or a peer's message for that step arrives, so an idle rank joins every step its
// peers run; a rank that will wait for a peer's value before sending that peer anything
// (recursive doubling's fold-in) wakes it first (dpwake), as it may have no reason to
// start. With async scheduling the all-reduce of step N+1 runs while the ranks
// execute step N; it never runs on a rank's thread.
//
// With live EPLB it sends every step's expert counts to the planner, hands new
// placements to its rank, and adds the rank's copied placement to its DP-sync
// contribution; the step whose agreed min reaches a new placement switches every rank
// (messages.h, "Live EPLB").
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "actors/engine_parts.h"
#include "kernels/check.h"
#include "runtime/kv_cache/pin_index.h"
#include "runtime/kv_transfer/kv_handoff_wire.h"
#include "runtime/kv_transfer/staging_leases.h"
#include "runtime/scheduler/import_handoff.h"

namespace troupe::actors {
namespace {

using DpSync = runtime::collectives::AllReduceRank<runtime::collectives::StepMetadata,
                                                   runtime::collectives::StepMetadataReduce>;

struct SchedulerState {
  std::unique_ptr<runtime::KvCacheManager> kv;
  std::unique_ptr<runtime::Scheduler> scheduler;
  std::unique_ptr<runtime::StepPipeline> pipeline;  // counts into ledger->counters
  std::shared_ptr<runtime::TierStorage> tiers;  // null: no host and disk tiers
  uint64_t pins_written = 0;  // the KV manager's pins_version() the disk index holds
  std::unordered_map<runtime::RequestId, int64_t> restored;  // kv_restore: tokens put first
  // KV hand-off (docs/pd.md): the clients of requests parked here, until moved or failed;
  // the KV layout another engine's hand-offs must have to continue here.
  std::unordered_map<runtime::RequestId, caf::actor> handed_off;
  runtime::KvHandoffShape shape;
  const model::ServingShape* model = nullptr;
  std::shared_ptr<const runtime::FaultPlan> faults;  // kv-import-drop / -stall; null: none
  std::shared_ptr<EngineLedger> ledger;
  rank_actor rank;
  double request_timeout = 0;
  int depth = 1;  // steps the rank may hold at once (2: async scheduling)
  // Steps sent to the rank and not answered yet, oldest first.
  struct AtRank {
    bool real = true;     // the pipeline's plan; false: a dummy step (lockstep only)
    int64_t step = 0;     // the group's step id (lockstep), else the plan's
    int64_t epoch = 0;    // the expert placement it runs on
    int64_t draft_epoch = 0;  // the draft's
  };
  std::deque<AtRank> at_rank;
  // --- lockstep only
  SyncSetup sync;
  std::unique_ptr<DpSync> dp;  // this rank's part of the per-step all-reduce
  DpPeers peers;               // empty until the supervisor sends them
  int64_t sync_step = 1;       // the group step whose all-reduce comes next
  int64_t woken = 0;           // the latest step a peer woke this rank for
  std::vector<int32_t> wake;   // peers to wake as a step starts (wake_peers)
  bool syncing = false;        // that all-reduce is running
  const runtime::StepPlan* sync_plan = nullptr;  // the plan it is for; null: none here
  // An adaptive draft length, the group's (StepPipeline::group_draft_length): this rank's
  // summaries of the steps it finished, by group step, until an all-reduce carries them.
  std::map<int64_t, runtime::DraftStepSummary> draft_steps;
  // --- live EPLB only: the target's placements, and the draft's (balanced apart)
  struct Placements {
    int64_t ready = 0;        // the newest placement the rank has copied (its results say)
    int64_t epoch = 0;        // the placement the last step sent runs on
    PlacementUpdate update;   // the newest placement the planner sent
  };
  eplb_planner_actor planner;
  Placements target, draft;
};

// The placements a step switches to first (0: none), target's and draft's.
struct Switch {
  int64_t target = 0, draft = 0;
  bool any() const { return target > 0 || draft > 0; }
};

using scheduler_pointer = scheduler_core_actor::stateful_pointer<SchedulerState>;

void stream(scheduler_pointer self, std::vector<runtime::RequestOutput> outputs) {
  auto& clients = self->state.ledger->clients;
  for (runtime::RequestOutput& out : outputs) {
    auto it = clients.find(out.id);
    if (it == clients.end()) continue;
    const bool last = out.finished();
    if (const auto r = self->state.restored.find(out.id); r != self->state.restored.end()) {
      out.num_restored_tokens = r->second;
      if (last) self->state.restored.erase(r);
    }
    TokenEvent ev{std::move(out), {}};
    if (ev.output.status == runtime::RequestStatus::HandedOff) {
      self->state.handed_off[ev.output.id] = it->second;
      if (const auto* p = self->state.scheduler->parked(ev.output.id)) ev.resume = handoff_bytes(runtime::kv_handoff_header(*p));
    }
    caf::anon_send(it->second, token_atom::value, std::move(ev));  // untyped client
    if (last) clients.erase(it);
  }
}

// The prefix-cache totals: the earlier incarnations' (the ledger's base) plus this one's.
void count_prefix_cache(SchedulerState& s) {
  EngineLedger& l = *s.ledger;
  l.counters.prefix_query_tokens = l.prefix_query_base + s.kv->stats().query_tokens;
  l.counters.prefix_hit_tokens = l.prefix_hit_base + s.kv->stats().hit_tokens;
  l.counters.prefix_snapshot_hits = l.snapshot_hit_base + s.kv->stats().snapshot_hits;
  l.counters.prefix_replay_hits = l.replay_hit_base + s.kv->stats().replay_hits;
  l.counters.prefix_replay_tokens = l.replay_token_base + s.kv->stats().replay_tokens;
  for (int t = 0; t < 3; ++t)
    l.counters.prefix_tier_hit_tokens[t] = l.tier_hit_base[t] + s.kv->stats().tier_hit_tokens[t];
}

// The step threw: every request in it ends with the rank's error (never a silent abort).
std::vector<runtime::RequestOutput> fail_step(SchedulerState& st, const StepResult& result) {
  const runtime::StepPlan& plan = st.pipeline->oldest();
  std::vector<runtime::RequestId> ids;
  for (const auto& c : plan.chunks) ids.push_back(c.id);
  spdlog::error("scheduler: step {} (rank step {}) failed: {}; failing requests {}", plan.step,
                result.rank_step, result.error, ids);
  const std::string why = "step " + std::to_string(plan.step) + " failed: " + result.error;
  return st.pipeline->complete_failed(why, result.run_seconds);
}

void kick(scheduler_pointer self);

// KV save by name (docs/kv-cache.md "Saved prefixes"): the disk tier's index of the saved
// prefixes follows the KV manager's pins, so a restart on the same dir knows them.
void save_pin_index(SchedulerState& s) {
  if (!s.tiers || s.tiers->disk_dir().empty() || s.kv->pins_version() == s.pins_written) return;
  s.pins_written = s.kv->pins_version();
  std::vector<runtime::SavedPrefix> pins;
  for (const auto& [name, pin] : s.kv->pins()) pins.push_back({name, pin.tokens});
  std::sort(pins.begin(), pins.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  runtime::write_pin_index(s.tiers->disk_dir(), pins);
}

void adopt_pin_index(SchedulerState& s) {
  if (!s.tiers || s.tiers->disk_dir().empty()) return;
  for (const runtime::SavedPrefix& p : runtime::read_pin_index(s.tiers->disk_dir()))
    if (!s.kv->adopt_pin(p.name, p.tokens))
      spdlog::warn("kv save: saved prefix '{}' not restored (over kv-pinned-bytes or empty)", p.name);
  s.pins_written = s.kv->pins_version();
}

// Live EPLB: the step's counts to the planner; what the rank has copied, for DP sync.
void report_counts(scheduler_pointer self, const SchedulerState::AtRank& step,
                   const StepResult& result) {
  auto& s = self->state;
  s.target.ready = std::max(s.target.ready, result.placement_ready);
  s.draft.ready = std::max(s.draft.ready, result.draft_placement_ready);
  auto routed = [](const std::vector<int64_t>& counts) {
    return std::any_of(counts.begin(), counts.end(), [](int64_t c) { return c != 0; });
  };
  const std::vector<int64_t> none;
  self->send(s.planner, eplb_atom::value,
             ExpertCounts{s.sync.rank, step.step, step.epoch,
                          routed(result.expert_counts) ? result.expert_counts : none, false});
  if (s.sync.draft_eplb)  // every rank reports the draft's counts of every step, idle or not
    self->send(s.planner, eplb_atom::value,
               ExpertCounts{s.sync.rank, step.step, step.draft_epoch,
                            routed(result.draft_expert_counts) ? result.draft_expert_counts : none,
                            true});
}

void on_step_result(scheduler_pointer self, const StepResult& result) {
  auto& s = self->state;
  const SchedulerState::AtRank step = s.at_rank.front();
  const bool real = step.real;
  s.at_rank.pop_front();
  if (s.planner) report_counts(self, step, result);
  if (real) {
    stream(self, result.error.empty() ? s.pipeline->complete(result.sampled, result.run_seconds)
                                      : fail_step(s, result));
    count_prefix_cache(s);
  } else if (!result.error.empty()) {  // a peer failed the step; nothing of ours was in it
    spdlog::debug("scheduler: dummy step (rank step {}) failed: {}", result.rank_step,
                  result.error);
  }
  if (s.dp && s.pipeline->group_draft_length())
    s.draft_steps[step.step] = s.pipeline->step_summary(real, result.run_seconds);
  save_pin_index(s);
  // Lockstep: a peer may be waiting; a saved prefix's disk writes are a plan of their own.
  if (s.dp || s.scheduler->has_unfinished() || s.kv->has_pending_tier_ops()) kick(self);
}

// Live EPLB: the placement a step agreed on (the min over the ranks of what each has
// copied) becomes the one it runs on, when newer; counted once, on every rank alike.
int64_t placement_for_step(SchedulerState& s, SchedulerState::Placements& p, int64_t agreed_ready) {
  if (!s.planner || agreed_ready <= p.epoch) return 0;
  p.epoch = agreed_ready;
  runtime::EngineFigures& c = s.ledger->counters;
  const bool draft = &p == &s.draft;
  (draft ? c.eplb_draft_rebalances : c.eplb_rebalances) += 1;
  if (p.update.epoch == agreed_ready) {
    (draft ? c.eplb_draft_balance_before : c.eplb_balance_before) = p.update.balance_before;
    (draft ? c.eplb_draft_balance_after : c.eplb_balance_after) = p.update.balance_after;
  }
  return agreed_ready;
}

// Both models' placements for a step the group agreed on these readies.
Switch switch_for_step(SchedulerState& s, int64_t target_ready, int64_t draft_ready) {
  return {placement_for_step(s, s.target, target_ready), placement_for_step(s, s.draft, draft_ready)};
}

// Sends a plan to the rank; the rank answers in order, so results complete the
// pipeline's plans oldest first (dummy steps in between are skipped). to: the expert
// placements the step switches to first. draft: some rank of the group drafts (DP sync),
// so this one joins the draft's exchanges too.
void send_to_rank(scheduler_pointer self, const runtime::StepPlan& plan, bool real, int64_t step,
                  Switch to = {}, bool draft = false) {
  auto& s = self->state;
  s.at_rank.push_back({real, step, s.target.epoch, s.draft.epoch});
  if (real && s.sync.engram) self->send(s.sync.engram, prefetch_atom::value, plan);
  // A plan that drafts joins the draft's exchanges by itself: no copy for it.
  const bool tell_draft = draft && !plan.drafts();
  const bool copy = to.any() || tell_draft;
  runtime::StepPlan agreed;
  if (copy) {
    agreed = plan;
    agreed.placement_epoch = to.target;
    agreed.draft_placement_epoch = to.draft;
    agreed.draft_exchange = tell_draft;
  }
  self->request(s.rank, caf::infinite, run_atom::value, copy ? agreed : plan)
      .then([=](const StepResult& result) { on_step_result(self, result); },
            [=](caf::error& err) {  // the rank is gone: the supervisor restarts us all
              const SyncSetup& sync = self->state.sync;
              self->state.ledger->death = member_name("rank", sync.rank, sync.size) + " died: " +
                                          describe(self->home_system(), err);
              self->quit(err);
            });
}

// The step's all-reduce completed: every rank of the group now runs it, this one its
// plan or a dummy step.
void on_synced(scheduler_pointer self, const runtime::collectives::StepMetadata& m) {
  auto& s = self->state;
  TROUPE_CHECK(m.agreed(), "DP sync: ranks at steps ", m.step_min, "..", m.step_max);
  const runtime::StepPlan* plan = std::exchange(s.sync_plan, nullptr);
  s.syncing = false;
  const int64_t step = s.sync_step++;
  // Every rank alike, before its next plan: the same k from the same group steps.
  if (s.pipeline->group_draft_length()) s.pipeline->agree_draft_length(m.draft_step);
  if (!m.any_work) return;
  const Switch to = switch_for_step(s, m.placement_ready, m.draft_placement_ready);
  send_to_rank(self, plan ? *plan : runtime::StepPlan{}, plan != nullptr, step, to, m.any_draft);
}

// The peers a rank receives from before it has sent them anything, in its schedule:
// they learn of the step from no message of this rank's, so it wakes them.
std::vector<int32_t> wake_peers(const runtime::collectives::CollectiveSchedule& schedule) {
  std::vector<int32_t> sent, wake;
  using Kind = runtime::collectives::ScheduleAction::Kind;
  for (const auto& a : schedule.actions) {
    const bool known = std::find(sent.begin(), sent.end(), a.peer) != sent.end();
    if (a.kind == Kind::Send) sent.push_back(a.peer);
    else if (!known && std::find(wake.begin(), wake.end(), a.peer) == wake.end())
      wake.push_back(a.peer);
  }
  return wake;
}

void deliver(scheduler_pointer self, runtime::collectives::Progress<runtime::collectives::StepMetadata> p) {
  auto& s = self->state;
  for (DpSyncMessage& m : p.send) self->send(s.peers.at(m.to), dpsync_atom::value, std::move(m));
  if (p.result) on_synced(self, *p.result);
}

// What this rank's all-reduce of the next step carries for the group's draft length: its
// summary of the step `depth` back (finished here unless steps between had no work: a
// rank holds at most depth - 1 steps as it starts one; a summary not yet here is left out
// on this rank, and every rank still gets the same reduction) and its running requests.
runtime::DraftStepSummary draft_step_to_send(SchedulerState& s) {
  const int64_t of = s.sync_step - s.depth;
  runtime::DraftStepSummary d;
  if (auto it = s.draft_steps.find(of); it != s.draft_steps.end()) d = std::move(it->second);
  s.draft_steps.erase(s.draft_steps.begin(), s.draft_steps.upper_bound(of));
  d.running = s.scheduler->num_running();
  return d;
}

// Lockstep: plans the next step if the rank has room and starts its all-reduce, when
// this rank has a plan or a peer has started that step.
void kick_lockstep(scheduler_pointer self, std::vector<runtime::RequestOutput>& finished) {
  auto& s = self->state;
  while (!s.syncing && !s.peers.empty() && static_cast<int>(s.at_rank.size()) < s.depth) {
    const runtime::StepPlan* plan = s.pipeline->plan_next(finished);
    if (plan == nullptr && s.dp->buffered() == 0 && s.woken < s.sync_step)
      return;  // nothing here, no peer waiting
    s.syncing = true;
    s.sync_plan = plan;
    for (int32_t peer : s.wake) self->send(s.peers.at(peer), dpwake_atom::value, s.sync_step);
    const int64_t tokens = plan ? plan->num_tokens : 0;
    runtime::collectives::StepMetadata mine = runtime::collectives::local_step_metadata(
        s.sync.rank, s.sync.size, s.sync_step, tokens, plan != nullptr, s.target.ready,
        /*failed=*/false, plan && plan->drafts(), s.draft.ready);
    if (s.pipeline->group_draft_length()) mine.draft_step = draft_step_to_send(s);
    deliver(self, s.dp->start(s.sync_step, std::move(mine)));
  }
}

// Sends the rank every plan the pipeline has room for (one, or two with async
// scheduling: the next plan is made while the rank runs the current one).
void kick(scheduler_pointer self) {
  auto& st = self->state;
  std::vector<runtime::RequestOutput> finished;  // outside a step: aborts, failures
  if (st.dp) {
    kick_lockstep(self, finished);
  } else {
    while (const runtime::StepPlan* plan = st.pipeline->plan_next(finished))
      send_to_rank(self, *plan, true, static_cast<int64_t>(plan->step),
                   switch_for_step(st, st.target.ready, st.draft.ready));
  }
  stream(self, std::move(finished));
}

// The request's outputs go to `client`; with request-timeout its timer starts.
void watch(scheduler_pointer self, runtime::RequestId id, const caf::actor& client) {
  auto& s = self->state;
  s.ledger->clients[id] = client;
  if (s.request_timeout > 0)
    self->delayed_send(self, std::chrono::microseconds(std::llround(s.request_timeout * 1e6)),
                       timeout_atom::value, id);
}

// KV save by name, before the scheduler sees the request: a delete is answered here, a
// restore gets its saved tokens before its prompt, a save reserves its pinned budget.
// False: the request was answered (done, or refused).
bool kv_by_name(SchedulerState& s, GenerateRequest& req, const caf::actor& client) {
  const runtime::RequestParams& p = req.params;
  auto unknown = [&](const std::string& name) {
    send_error(client, req.id, "no saved KV prefix named \"" + name + "\"",
               runtime::ErrorCause::NotFound);
    return false;
  };
  if (!p.kv_delete.empty()) {
    if (!s.kv->unpin(p.kv_delete)) return unknown(p.kv_delete);
    save_pin_index(s);
    runtime::RequestOutput out;
    out.id = req.id;
    out.status = runtime::RequestStatus::FinishedStopped;
    caf::anon_send(client, token_atom::value, TokenEvent{std::move(out), {}});
    return false;
  }
  if (!p.kv_restore.empty()) {
    const runtime::KvPin* pin = s.kv->find_pin(p.kv_restore);
    if (pin == nullptr) return unknown(p.kv_restore);
    req.prompt.insert(req.prompt.begin(), pin->tokens.begin(), pin->tokens.end());
  }
  if (!p.kv_save.empty()) {
    if (std::string why = s.kv->reserve_pin(req.id, p.kv_save, req.prompt); !why.empty()) {
      send_error(client, req.id, why, runtime::ErrorCause::NoRoom);
      return false;
    }
  }
  return true;
}

// Adds the request (and its n > 1 siblings) or answers each with the reason it was refused.
void add(scheduler_pointer self, GenerateRequest& req, const caf::actor& client) {
  auto& s = self->state;
  std::vector<runtime::RequestId> ids{req.id};
  for (const runtime::Sibling& sib : req.siblings) ids.push_back(sib.id);
  if (!kv_by_name(s, req, client)) return;
  const runtime::KvPin* restored =
      req.params.kv_restore.empty() ? nullptr : s.kv->find_pin(req.params.kv_restore);
  const int64_t num_restored = restored ? int64_t(restored->tokens.size()) : 0;
  try {
    s.scheduler->add_request(req.id, req.prompt, std::move(req.params), std::move(req.siblings));
    if (num_restored > 0) {
      s.ledger->counters.kv_restore_hits += 1;
      for (runtime::RequestId id : ids) s.restored[id] = num_restored;
    }
  } catch (const troupe::Error& e) {  // bad input: answer the requester, keep serving
    s.kv->cancel_pin(req.id);
    spdlog::warn("scheduler: request {} refused: {}", req.id, e.what());
    for (runtime::RequestId id : ids)
      send_error(client, id, e.what(), runtime::ErrorCause::BadRequest);
    return;
  }
  for (runtime::RequestId id : ids) watch(self, id, client);
  kick(self);
}

// A parked request's KV is no longer needed here: moved, or the move failed.
void release_parked(scheduler_pointer self, runtime::RequestId id) {
  self->state.scheduler->release_parked(id);
  self->state.handed_off.erase(id);
  kick(self);  // waiting requests may fit now
}

runtime::KvTransferFailure failure_of(const caf::error& err) {
  if (err == caf::sec::request_timeout) return runtime::KvTransferFailure::Timeout;
  if (err == caf::sec::request_receiver_down) return runtime::KvTransferFailure::ReceiverDown;
  return runtime::KvTransferFailure::Refused;
}

// Moves parked request id to the engine `target` (P/D, drain; docs/pd.md): the rank packs
// its KV (after every step sent before), the instance's transfer agent moves it (by RMA
// where it can: kv_agent.cpp), the target takes it or says why not. Its blocks stay
// pinned here until the target answers; no answer within the lease
// (runtime::kv_transfer_lease, and a little more so the agent's own timeout is heard
// first) counts as a failure. Either way they are released then. The answer goes to whoever asked: "" once
// the target has it, else why not and the request's tokens as a hand-off without KV, so
// the asker (the cluster router) can have them recomputed elsewhere ("When a move
// fails"). An anonymous ask has no one to answer: a failed move then ends the request.
caf::result<std::string, KvHandoffBytes> hand_off(scheduler_pointer self, runtime::RequestId id,
                                                  caf::actor target) {
  auto& s = self->state;
  const runtime::Scheduler::ParkedRequest* p = s.scheduler->parked(id);
  const auto client = s.handed_off.find(id);
  if (p == nullptr || client == s.handed_off.end()) {
    spdlog::debug("scheduler: hand-off of request {}: not parked here", id);
    return {"request " + std::to_string(id) + " is not parked here", KvHandoffBytes{}};
  }
  KvExport ex{runtime::kv_handoff_header(*p), {}, s.kv->swa_slot(id)};
  const KvHandoffBytes tokens_only = handoff_bytes(ex.header);  // header: no shape, no region
  const auto table = s.kv->block_table(id);
  ex.table.assign(table.begin(), table.end());
  ex.header.shape = s.shape;
  GenerateRequest req{id, {}, p->params, {}};
  req.params.kv_hand_off_after = 0;
  const bool asked = self->current_sender() != nullptr;
  auto rp = self->make_response_promise<std::string, KvHandoffBytes>();
  const caf::actor to = client->second;
  auto fail = [self, id, to, asked, rp, tokens_only](runtime::KvTransferFailure cause,
                                                       const std::string& why) mutable {
    spdlog::warn("scheduler: request {}: KV hand-off failed: {}", id, why);
    self->state.ledger->counters.kv_transfer_failures[size_t(cause)] += 1;
    release_parked(self, id);
    if (asked) rp.deliver(why, tokens_only);
    else send_error(to, id, "KV hand-off failed: " + why, runtime::ErrorCause::StepFailed);
  };
  if (!target) {
    fail(runtime::KvTransferFailure::NoReceiver, "no engine to continue it is up");
    return rp;
  }
  const auto started = std::chrono::steady_clock::now();
  self->request(s.rank, caf::infinite, export_atom::value, std::move(ex))
      .then(
          [=](KvHandoffValue& packed) mutable {
            const auto size = static_cast<int64_t>(packed.h.region.size());
            const auto lease = runtime::kv_transfer_lease(uint64_t(size)) + std::chrono::milliseconds(500);
            self->request(self->state.sync.agent, lease, kvpush_atom::value, req, std::move(packed),
                          target, to)
                .then(
                    [=](const std::string& why) mutable {
                      if (!why.empty())
                        return fail(runtime::KvTransferFailure::Refused,
                                    "the receiver refused it: " + why);
                      const std::chrono::duration<double> took =
                          std::chrono::steady_clock::now() - started;
                      runtime::count_kv_transfer(self->state.ledger->counters, size, took.count());
                      release_parked(self, id);
                      if (asked) rp.deliver(std::string(), KvHandoffBytes{});
                    },
                    [=](caf::error& err) mutable {
                      fail(failure_of(err), describe(self->home_system(), err));
                    });
          },
          [=](caf::error& err) mutable {
            fail(runtime::KvTransferFailure::Export, "export: " + describe(self->home_system(), err));
          });
  return rp;
}

// Drain (docs/pd.md "Drain"): parks running request id where its KV is consistent - now,
// or after the step in flight - so its HandedOff event reaches its client (the cluster
// router), which moves it. A request holding no KV here (waiting) stays: the asker asks
// again later.
void park(scheduler_pointer self, runtime::RequestId id) {
  auto& s = self->state;
  switch (s.scheduler->hand_off(id)) {
    case runtime::Scheduler::HandOff::Now:
      stream(self, s.scheduler->take_finished());
      break;
    case runtime::Scheduler::HandOff::AfterStep:
      kick(self);
      break;
    case runtime::Scheduler::HandOff::NotHeld:
    case runtime::Scheduler::HandOff::Unknown:
      spdlog::debug("scheduler: park request {}: it holds no KV here", id);
      break;
  }
}

// A request moved here from another engine: queued like any request (admitted at most
// max_kv_loads_per_step a step) with its KV, or, when it brings none or its KV does not fit
// here, to recompute its tokens (import_handoff). Returns why it cannot continue here, or "".
std::string import(scheduler_pointer self, GenerateRequest& req, runtime::KvHandoff h,
                   const caf::actor& client) {
  auto& s = self->state;
  try {
    const runtime::ImportResult r =
        runtime::import_handoff(*s.scheduler, req.id, std::move(h), std::move(req.params), s.shape, *s.model);
    if (!r.loads_kv) {
      spdlog::warn("scheduler: request {} recomputes its tokens here: {}", req.id, r.kv_refused);
      s.ledger->counters.kv_transfer_fallbacks += 1;
    }
  } catch (const troupe::Error& e) {  // bad input: the sender hears why, serving goes on
    return e.what();
  }
  watch(self, req.id, client);
  kick(self);
  return {};
}

// A hand-off coming in, in bytes or as a value (`get` decodes it, or throws): the injected
// import faults first, then import. Taken at or past `give_up`, its sender has given up on
// the move (and has it recomputed elsewhere): dropped here, its memory freed, instead of
// running until the router's abort reaches it.
template <typename Get>
caf::result<std::string> receive(scheduler_pointer self, GenerateRequest& req,
                                 const caf::actor& client,
                                 std::chrono::steady_clock::time_point give_up, Get get) {
  const auto fault = self->state.faults ? self->state.faults->next_import()
                                        : runtime::FaultPlan::ImportFault{};
  if (fault.drop) {
    spdlog::warn("scheduler: injected fault kv-import-drop: request {} dropped", req.id);
    return self->make_response_promise<std::string>();  // never delivered
  }
  if (fault.stall_ms > 0) {
    spdlog::warn("scheduler: injected fault kv-import-stall: {} ms", fault.stall_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(fault.stall_ms));
  }
  runtime::KvHandoff h;
  try {
    h = get();
  } catch (const troupe::Error& e) {  // bad input from another process: the sender hears why
    return std::string(e.what());
  }
  if (std::chrono::steady_clock::now() >= give_up) {
    spdlog::warn("scheduler: request {}: its KV hand-off came after its sender's lease; dropped",
                 req.id);
    return std::string("the hand-off arrived after its lease");
  }
  return import(self, req, std::move(h), client);
}

// Ends a request with an error now, even while its step runs (timeout, shutdown).
void fail_now(scheduler_pointer self, runtime::RequestId id, std::string why,
              runtime::ErrorCause cause) {
  auto& s = self->state;
  s.scheduler->fail(id, std::move(why), cause);
  stream(self, s.scheduler->take_finished());
  kick(self);
}

void time_out(scheduler_pointer self, runtime::RequestId id) {
  auto& s = self->state;
  const runtime::Request* r = s.scheduler->find(id);
  if (r == nullptr || r->finished()) return;  // finished in time
  char why[96];
  std::snprintf(why, sizeof why, "request timed out after %.3g s (request-timeout)",
                s.request_timeout);
  spdlog::warn("scheduler: request {} timed out after {} output tokens", id,
               r->num_output_tokens());
  fail_now(self, id, why, runtime::ErrorCause::Timeout);
}

runtime::EngineFigures figures(SchedulerState& s) {
  runtime::EngineFigures earlier = s.ledger->counters;  // prefix counts: earlier incarnations'
  earlier.prefix_query_tokens = s.ledger->prefix_query_base;
  earlier.prefix_hit_tokens = s.ledger->prefix_hit_base;
  earlier.prefix_snapshot_hits = s.ledger->snapshot_hit_base;
  earlier.prefix_replay_hits = s.ledger->replay_hit_base;
  earlier.prefix_replay_tokens = s.ledger->replay_token_base;
  for (int t = 0; t < 3; ++t) earlier.prefix_tier_hit_tokens[t] = s.ledger->tier_hit_base[t];
  return runtime::current_figures(earlier, *s.scheduler, *s.kv);
}

// How much of `prompt` this scheduler's KV holds (primary, host or disk: counted without
// reading a file), its load, and whether it holds the saved prefix `name` (probe_atom).
runtime::RankLoad probe(SchedulerState& s, const std::vector<int32_t>& prompt,
                        const std::string& name = {}) {
  const int64_t requests = static_cast<int64_t>(s.scheduler->running_ids().size() +
                                                s.scheduler->waiting_ids().size());
  return {requests, s.kv->cached_prefix_tokens(prompt),
          !name.empty() && s.kv->find_pin(name) != nullptr};
}

scheduler_core_actor::behavior_type scheduler_fun(
    scheduler_pointer self, const model::BatchForward* forward, const model::TextTokenizer* tokenizer,
    runtime::EngineConfig config, runtime::KvCacheConfig kv, rank_actor rank,
    std::shared_ptr<EngineLedger> ledger, double request_timeout, SyncSetup sync,
    std::shared_ptr<runtime::TierStorage> tiers, std::shared_ptr<const runtime::FaultPlan> faults) {
  auto& st = self->state;
  st.faults = std::move(faults);
  st.kv = std::make_unique<runtime::KvCacheManager>(kv);
  if (tiers) runtime::attach_disk_tier(*st.kv, *tiers);  // before the rank sees a plan
  st.tiers = tiers;
  adopt_pin_index(st);  // after the disk files joined the tier
  st.scheduler = std::make_unique<runtime::Scheduler>(
      config.scheduler, *st.kv, forward->shape().eos_token_id, tokenizer);
  st.rank = std::move(rank);
  st.ledger = std::move(ledger);
  st.pipeline = std::make_unique<runtime::StepPipeline>(
      *st.scheduler, st.ledger->counters, config.async_scheduling ? 2 : 1,
      sync.lockstep ? sync.size : 1);
  st.request_timeout = request_timeout;
  st.depth = config.async_scheduling ? 2 : 1;
  st.model = &forward->shape();
  st.shape = runtime::KvHandoffShape::of(forward->shape(), kv.block_size,
                                         runtime::kv_rows_mode(config.executor));
  st.sync = sync;
  st.planner = sync.planner;
  if (sync.lockstep) {
    st.dp = std::make_unique<DpSync>(
        runtime::collectives::recursive_doubling_schedule(sync.rank, sync.size));
    st.wake = wake_peers(st.dp->schedule());
  }
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor client) {
        add(self, req, client);
        return true;
      },
      [=](abort_atom, runtime::RequestId id) {
        self->state.scheduler->abort(id);
        kick(self);
      },
      [=](fail_atom, runtime::RequestId id, std::string& why) {
        spdlog::warn("scheduler: request {} ended: {}", id, why);
        fail_now(self, id, std::move(why), runtime::ErrorCause::Shutdown);
      },
      [=](stats_atom) { return figures(self->state); },
      [=](timeout_atom, runtime::RequestId id) { time_out(self, id); },
      [=](probe_atom, const std::vector<int32_t>& prompt) { return probe(self->state, prompt); },
      [=](probe_atom, const std::vector<int32_t>& prompt, const std::string& name) {
        return probe(self->state, prompt, name);
      },
      [=](dpsync_atom, DpSyncMessage& m) {
        auto& s = self->state;
        TROUPE_CHECK(s.dp, "scheduler: a DP-sync message, but this rank is not in lockstep");
        deliver(self, s.dp->receive(std::move(m)));  // kept if its step has not started here
        kick(self);  // a peer started a step this rank has not: join it
      },
      [=](dpwake_atom, int64_t step) {
        auto& s = self->state;
        s.woken = std::max(s.woken, step);
        kick(self);
      },
      [=](peers_atom, DpPeers& peers) {
        self->state.peers = std::move(peers);
        kick(self);
      },
      [=](handoff_atom, runtime::RequestId id, caf::actor target) {
        return hand_off(self, id, std::move(target));
      },
      [=](park_atom, runtime::RequestId id) { park(self, id); },
      [=](import_atom, GenerateRequest& req, KvHandoffBytes& bytes,
          caf::actor client) -> caf::result<std::string> {
        const auto give_up = bytes.lease_ms > 0
                                 ? std::chrono::steady_clock::now() + std::chrono::milliseconds(bytes.lease_ms)
                                 : std::chrono::steady_clock::time_point::max();
        return receive(self, req, client, give_up, [&] {
          const auto* b = reinterpret_cast<const std::byte*>(bytes.bytes.data());
          return runtime::decode_kv_handoff(std::vector<std::byte>(b, b + bytes.bytes.size()));
        });
      },
      [=](import_atom, GenerateRequest& req, KvHandoffValue& v,
          caf::actor client) -> caf::result<std::string> {  // its region came by RMA
        return receive(self, req, client, v.give_up, [&] { return std::move(v.h); });
      },
      [=](stage_atom, PlacementUpdate& update) {  // from the planner: the rank copies it
        auto& s = self->state;
        (update.draft ? s.draft : s.target).update = update;
        self->send(s.rank, stage_atom::value, std::move(update));
      },
  };
}

}  // namespace

std::string describe(caf::actor_system& sys, const caf::error& reason) {
  const caf::message& ctx = reason.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return sys.render(reason);
}

void send_error(const caf::actor& client, runtime::RequestId id, std::string why,
                runtime::ErrorCause cause) {
  runtime::RequestOutput out;
  out.id = id;
  out.status = runtime::RequestStatus::FinishedError;
  out.error = std::move(why);
  out.error_cause = cause;
  caf::anon_send(client, token_atom::value, TokenEvent{std::move(out), {}});
}

scheduler_core_actor spawn_scheduler(caf::actor_system& sys, const model::BatchForward& forward,
                                     const model::TextTokenizer* tokenizer,
                                     const runtime::EngineConfig& config,
                                     const runtime::KvCacheConfig& kv, rank_actor rank,
                                     std::shared_ptr<EngineLedger> ledger, double request_timeout,
                                     SyncSetup sync, std::shared_ptr<runtime::TierStorage> tiers,
                                     std::shared_ptr<const runtime::FaultPlan> faults) {
  return sys.spawn(scheduler_fun, &forward, tokenizer, config, kv, std::move(rank),
                   std::move(ledger), request_timeout, sync, std::move(tiers), std::move(faults));
}

}  // namespace troupe::actors
