// The supervisor: the engine instance's stable handle. It spawns the instance's ranks
// and their schedulers (one pair for one rank; R pairs for DEP-R), links to all of them
// and traps their exits. When any dies, the whole instance ends and starts again: /health
// turns 503 with the reason, an expert-parallel group is closed (so no rank waits in an
// exchange for a dead peer), every scheduler is stopped, and once all their exits have
// come, every request they held (EngineLedger::clients) ends with an error naming the
// cause and fresh ranks and schedulers start (counted in runtime::EngineFigures::restarts);
// past max_restarts within the window the instance stays down and answers new requests
// with an error.
//
//   rank r dies -------> supervisor: close the group, send_exit(every scheduler) --+
//   scheduler r dies --> (the same) --------------------------------------------------+
//        every scheduler's exit --> fail their clients, kill the ranks, start them all again
//
// A ledger is read only after its scheduler's exit message, so never while it runs.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <unordered_set>

#include "actors/supervisor_state.h"
#include "runtime/dep/rank_tiers.h"
#include "runtime/eplb/static_placement.h"

namespace troupe::actors {
namespace {

using Clock = SupervisorClock;

// Spawns the ranks and schedulers; /health turns ready once every rank answers (until
// then it says "starting", or "restarting" with the cause after a death).
void start(supervisor_pointer self) {
  auto& s = self->state;
  const int R = s.size();
  // Ranks in processes of their own: this process holds one, its group forms over UCX.
  const bool spread = s.options.member.has_value();
  const int group_size = spread ? s.options.member->size : R;
  const bool lockstep = s.options.expert_parallel && group_size > 1;
  s.incarnation += 1;
  s.ranks_ready = 0;
  s.ending.clear();
  const runtime::Drafter* drafter = s.config.speculative.enabled() ? s.options.drafter : nullptr;
  // The planner also runs, planning nothing, to record the counts (expert-counts-file).
  const bool eplb = s.options.expert_parallel && (s.options.eplb.enabled || s.counts);
  if (s.options.expert_parallel && !spread) s.group = std::make_shared<runtime::InProcessGroup>(R);
  // Every incarnation starts from the default placement (its ranks copy their slots anew).
  if (eplb) {
    s.planner = spawn_eplb_planner(self->home_system(), s.options.eplb, s.placement,
                                   drafter ? s.draft_placement : nullptr, R, s.counts);
    self->link_to(s.planner);
  }
  // Staging for hand-offs coming in: as much as the KV pool holds (no more could be
  // loaded at once), plus room for their slot states.
  const uint64_t staging = uint64_t(s.kv.num_blocks * s.kv.block_bytes) + (uint64_t(64) << 20);
  s.agent = spawn_kv_agent(self->home_system(), self->address(), s.agent_counts,
                           s.options.faults, staging, s.options.kv_put_backoff);
  self->link_to(s.agent);
  for (int r = 0; r < R; ++r) {
    const bool faulty = R == 1 || r == s.options.fault_rank;
    const int rank = spread ? s.options.member->rank : r;
    // Fresh tiers per incarnation: the host tier died with the rank; the disk files stay,
    // each rank's in its own folder (runtime/dep/rank_tiers.h), which its scheduler reads
    // back at its start (the disk index and the saved prefixes).
    std::shared_ptr<runtime::TierStorage> tiers = runtime::make_tier_storage(
        s.forward->shape(), runtime::rank_tier_config(s.config, rank, group_size), s.kv);
    // The communicator keeps its group alive (aliasing pointer).
    std::shared_ptr<runtime::Communicator> comm;
    if (s.group) comm = std::shared_ptr<runtime::Communicator>(s.group, &s.group->communicator(r));
    Member m;
    m.rank = spawn_rank(self->home_system(), *s.forward, s.kv, s.config.executor,
                        faulty ? s.options.faults : nullptr,
                        RankSetup{rank, std::move(comm), spread, s.placement,
                                  drafter ? s.draft_placement : nullptr, eplb, tiers, drafter});
    m.scheduler = spawn_scheduler(
        self->home_system(), *s.forward, s.tokenizer, s.config, s.kv, m.rank, s.ledgers[r],
        s.options.request_timeout,
        SyncSetup{rank, group_size, lockstep, s.planner, eplb && drafter && s.draft_placement,
                  s.options.engram_owner, s.agent},
        tiers,
        faulty ? s.options.faults : nullptr);
    self->link_to(m.rank);
    self->link_to(m.scheduler);
    self->monitor(m.scheduler);  // its down message says it stopped, however it died
    s.members.push_back(std::move(m));
  }
  if (eplb) {
    Schedulers schedulers;
    for (const Member& m : s.members) schedulers.push_back(m.scheduler);
    self->send(s.planner, peers_atom::value, std::move(schedulers));
  }
  if (lockstep && !spread) {
    DpPeers peers;
    for (const Member& m : s.members) peers.push_back(m.scheduler);
    for (const Member& m : s.members) self->send(m.scheduler, peers_atom::value, peers);
  }
  if (spread) return start_forming(self);  // ready once the group has formed (on_formed)
  const int64_t incarnation = s.incarnation;
  for (const Member& m : s.members)
    self->request(m.rank, caf::infinite, ping_atom::value)
        .then(
            [=](bool) {
              auto& st = self->state;
              if (st.incarnation == incarnation && st.ending.empty() &&
                  ++st.ranks_ready == st.size())
                st.options.health->set_ready();
            },
            [](caf::error&) {});  // it died first: its exit is handled below
}

bool may_restart(SupervisorState& s) {
  const auto now = Clock::now();
  const auto window = std::chrono::duration<double>(s.options.restart_window_seconds);
  while (!s.restarts.empty() && now - s.restarts.front() > window) s.restarts.pop_front();
  if (static_cast<int>(s.restarts.size()) >= s.options.max_restarts) return false;
  s.restarts.push_back(now);
  return true;
}

// Every scheduler of the ended incarnation has exited: end their requests, stop the
// ranks, start again (or stay down).
void on_ended(supervisor_pointer self) {
  auto& s = self->state;
  const std::string why = s.ending;
  for (Member& m : s.members) {
    self->unlink_from(m.rank);  // its exit, if it comes, is not news
    self->send_exit(m.rank, caf::exit_reason::kill);
    s.retired.push_back(m.rank.address());
  }
  if (s.planner) {
    self->unlink_from(s.planner);
    self->send_exit(s.planner, caf::exit_reason::kill);
    s.retired.push_back(s.planner.address());
    s.planner = nullptr;
  }
  if (s.agent) {  // its staging memory and puts in flight go with it
    self->unlink_from(s.agent);
    self->send_exit(s.agent, caf::exit_reason::kill);
    s.retired.push_back(s.agent.address());
    s.agent = nullptr;
  }
  while (s.retired.size() > 8 + 2 * s.members.size()) s.retired.pop_front();
  s.members.clear();
  s.group = nullptr;
  if (s.options.member) clear_group(self);
  size_t failed = 0;
  for (auto& ledger : s.ledgers) {
    auto clients = std::exchange(ledger->clients, {});
    failed += clients.size();
    for (auto& [id, client] : clients)
      send_error(client, id, "the engine failed (" + why + "); the request was lost",
                 runtime::ErrorCause::EngineDied);
    ledger->death.clear();
    ledger->prefix_query_base = ledger->counters.prefix_query_tokens;
    ledger->prefix_hit_base = ledger->counters.prefix_hit_tokens;
    ledger->snapshot_hit_base = ledger->counters.prefix_snapshot_hits;
    ledger->replay_hit_base = ledger->counters.prefix_replay_hits;
    ledger->replay_token_base = ledger->counters.prefix_replay_tokens;
    for (int t = 0; t < 3; ++t) ledger->tier_hit_base[t] = ledger->counters.prefix_tier_hit_tokens[t];
  }
  spdlog::error("engine: {}; failed {} requests", why, failed);
  if (!s.restart) {
    spdlog::critical("engine: down for good: {}", s.down);
    return;
  }
  for (auto& ledger : s.ledgers) ledger->counters.restarts += 1;
  spdlog::warn("engine: restarting {} (restart {})",
               s.size() == 1 ? "scheduler and rank" : "its " + std::to_string(s.size()) + " ranks",
               s.ledgers.front()->counters.restarts);
  start(self);
}

}  // namespace

// A member died: the whole incarnation ends. /health changes first, so a client told of
// the failure already finds it there; then no rank may wait on the dead one.
void end_incarnation(supervisor_pointer self, std::string why, bool counted) {
  auto& s = self->state;
  if (!s.ending.empty()) return;  // already ending: the first death names it
  s.ending = std::move(why);
  s.restart = !counted || may_restart(s);
  if (s.restart) {
    s.options.health->set_restarting(s.ending);
  } else {
    s.down = s.ending + " (" + std::to_string(s.options.max_restarts) + " restarts within " +
             fmt::format("{:g}", s.options.restart_window_seconds) +
             " s: max-engine-restarts, engine-restart-window)";
    s.options.health->set_down(s.down);
  }
  if (s.group) s.group->close(s.ending);
  if (s.options.member) close_group(s, s.ending);
  // A linked actor told to exit by its link partner does not report back through the
  // link (CAF drops the link), hence the monitors (on_down).
  for (Member& m : s.members)
    if (m.scheduler) self->send_exit(m.scheduler, caf::exit_reason::kill);
}

namespace {

// Why scheduler r died: its rank's death when it quit for that, else its own reason.
std::string scheduler_death(supervisor_pointer self, size_t r, const caf::error& reason) {
  auto& s = self->state;
  const std::string& death = s.ledgers[r]->death;
  if (!death.empty()) return death;
  return member_name("scheduler", int(r), s.size()) + " died: " +
         describe(self->home_system(), reason);
}

void on_exit(supervisor_pointer self, caf::exit_msg& msg) {
  auto& s = self->state;
  for (size_t r = 0; r < s.members.size(); ++r) {
    Member& m = s.members[r];
    if (m.scheduler && msg.source == m.scheduler.address())
      return end_incarnation(self, scheduler_death(self, r, msg.reason));  // on_down counts it
    if (m.rank && msg.source == m.rank.address())
      return end_incarnation(
          self, member_name("rank", int(r), s.size()) + " died: " + describe(self->home_system(), msg.reason));
  }
  if (s.planner && msg.source == s.planner.address())
    return end_incarnation(self, "the eplb planner died: " + describe(self->home_system(), msg.reason));
  if (s.agent && msg.source == s.agent.address())
    return end_incarnation(self, "the KV transfer agent died: " + describe(self->home_system(), msg.reason));
  const auto stale = std::find(s.retired.begin(), s.retired.end(), msg.source);
  if (stale != s.retired.end()) return void(s.retired.erase(stale));  // already replaced
  self->quit(msg.reason);  // shutdown: the links take the schedulers and the ranks along
}

// A scheduler of this incarnation has stopped (on its own, or told to): once all have,
// the incarnation has ended and its ledgers may be read.
void on_down(supervisor_pointer self, const caf::down_msg& msg) {
  auto& s = self->state;
  if (s.options.member && on_group_down(self, msg)) return;
  for (size_t r = 0; r < s.members.size(); ++r) {
    Member& m = s.members[r];
    if (!m.scheduler || msg.source != m.scheduler.address()) continue;
    end_incarnation(self, scheduler_death(self, r, msg.reason));
    s.retired.push_back(m.scheduler.address());  // its exit message may still come
    m.scheduler = nullptr;
    const bool all_down = std::none_of(s.members.begin(), s.members.end(),
                                       [](const Member& x) { return bool(x.scheduler); });
    if (all_down) on_ended(self);
    return;
  }
}

void refuse(const caf::actor& client, const std::vector<runtime::RequestId>& ids,
            const std::string& why) {
  for (runtime::RequestId id : ids) send_error(client, id, why, runtime::ErrorCause::EngineDied);
}

// Hands a request to rank r's scheduler; one the scheduler never took (it died with it
// in its mailbox) comes back as an error here and is answered.
void forward_generate(supervisor_pointer self, GenerateRequest req, const caf::actor& client,
                      int r) {
  auto& s = self->state;
  std::vector<runtime::RequestId> ids{req.id};
  for (const runtime::Sibling& sib : req.siblings) ids.push_back(sib.id);
  if (!s.down.empty()) return refuse(client, ids, "the engine is down: " + s.down);
  if (r >= static_cast<int>(s.members.size()) || !s.members[r].scheduler)
    return refuse(client, ids, "the engine is restarting (" + s.ending + ")");
  self->request(s.members[r].scheduler, caf::infinite, generate_atom::value, std::move(req), client)
      .then([](bool) {},
            [=](caf::error& err) {
              refuse(client, ids,
                     "the engine failed before taking the request (" +
                         describe(self->home_system(), err) + ")");
            });
  for (runtime::RequestId id : ids)  // after the generate: messages keep their order
    if (s.routing_aborts.erase(id) > 0) self->send(s.members[r].scheduler, abort_atom::value, id);
}

void route_next(supervisor_pointer self);

// The saved prefix a request names (KV save, restore or delete by name), or "": it goes
// to the rank holding that name (runtime::RankLoad::pinned), and a save of a name some
// rank holds replaces it there.
const std::string& saved_prefix_name(const runtime::RequestParams& p) {
  return !p.kv_restore.empty() ? p.kv_restore : !p.kv_delete.empty() ? p.kv_delete : p.kv_save;
}

// R > 1: asks every scheduler for its load, cached prefix of the prompt (in any of its
// tiers) and whether it holds the saved prefix the request names, then hands the request
// to the one runtime::choose_rank picks. One request at a time: the next
// probe goes out after the previous request was handed on, so (messages between two
// actors keep their order) every answer counts the requests routed before it. A
// scheduler that does not answer counts as fully loaded.
void route_generate(supervisor_pointer self, GenerateRequest& req, const caf::actor& client) {
  auto& s = self->state;
  if (s.size() == 1) return forward_generate(self, std::move(req), client, 0);
  s.routing.emplace_back(std::move(req), client);
  if (!s.probing) route_next(self);
}

void route_next(supervisor_pointer self) {
  auto& s = self->state;
  if (s.routing.empty()) {
    if (!s.probing && s.placing_imports.empty()) s.routing_aborts.clear();
    return;
  }
  auto [req, client] = std::move(s.routing.front());
  s.routing.pop_front();
  if (s.members.empty() || !s.ending.empty()) {
    forward_generate(self, std::move(req), client, 0);  // refused with the reason
    return route_next(self);
  }
  const int R = s.size();
  s.probing = true;
  auto pending = std::make_shared<GenerateRequest>(std::move(req));
  auto loads = std::make_shared<std::vector<runtime::RankLoad>>(R);
  auto left = std::make_shared<int>(R);
  const int64_t margin = s.options.prefix_load_margin;
  auto answered = [=, client = client](int r, runtime::RankLoad load) {
    (*loads)[r] = load;
    if (--*left > 0) return;
    self->state.probing = false;
    forward_generate(self, std::move(*pending), client, runtime::choose_rank(*loads, margin));
    route_next(self);
  };
  for (int r = 0; r < R; ++r)
    self->request(s.members[r].scheduler, std::chrono::seconds(10), probe_atom::value,
                  pending->prompt, saved_prefix_name(pending->params))
        .then([=](runtime::RankLoad load) { answered(r, load); },
              [=](caf::error&) { answered(r, {INT64_MAX / 2, 0}); });
}

// R > 1: every scheduler's figures, summed (runtime::sum_figures); a scheduler that does
// not answer contributes its ledger's counts as of its last step. The transfer agent's
// counts are the instance's, added once.
caf::result<runtime::EngineFigures> gather_figures(supervisor_pointer self) {
  auto& s = self->state;
  const int R = s.size();
  const std::shared_ptr<KvAgentCounters> agent = s.agent_counts;
  auto summed = [agent](const std::vector<runtime::EngineFigures>& parts) {
    runtime::EngineFigures f = parts.size() == 1 ? parts.front() : runtime::sum_figures(parts);
    agent->add_to(f);
    return f;
  };
  if (s.members.empty() || !s.ending.empty()) {
    std::vector<runtime::EngineFigures> counts;
    for (const auto& l : s.ledgers) counts.push_back(l->counters);
    return summed(counts);
  }
  auto rp = self->make_response_promise<runtime::EngineFigures>();
  auto parts = std::make_shared<std::vector<runtime::EngineFigures>>(R);
  auto left = std::make_shared<int>(R);
  for (int r = 0; r < R; ++r) {
    auto got = [=](runtime::EngineFigures f) mutable {
      (*parts)[r] = std::move(f);
      if (--*left == 0) rp.deliver(summed(*parts));
    };
    self->request(s.members[r].scheduler, std::chrono::seconds(5), stats_atom::value)
        .then([=](const runtime::EngineFigures& f) mutable { got(f); },
              [=](caf::error&) mutable { got(self->state.ledgers[r]->counters); });
  }
  return rp;
}

supervisor_actor::behavior_type supervisor_fun(supervisor_pointer self,
                                              const model::BatchForward* forward,
                                              const model::TextTokenizer* tokenizer,
                                              runtime::EngineConfig config,
                                              runtime::KvCacheConfig kv, EngineOptions options,
                                              std::shared_ptr<runtime::eplb::CountsRecorder> counts) {
  auto& s = self->state;
  s.forward = forward;
  s.tokenizer = tokenizer;
  s.config = std::move(config);
  s.kv = kv;
  s.options = std::move(options);
  s.counts = std::move(counts);
  for (int r = 0; r < s.size(); ++r) s.ledgers.push_back(std::make_shared<EngineLedger>());
  if (s.options.expert_parallel) {
    // The model's MoE layers (V4.1's, or a LLaMA-family MoE's) set the placement.
    s.placement = std::make_shared<const runtime::eplb::ExpertPlacement>(runtime::eplb::ep_default_placement(
        static_cast<int64_t>(forward->routed_layers().size()), model::routed_expert_count(*forward),
        s.options.member ? s.options.member->size : s.size(), s.options.num_redundant_experts));
    // The draft's MoE expert-parallel too, on its own placement (balanced apart from the
    // target's, MODEL.md §9): the same default layout and redundant count over its experts.
    const runtime::Drafter* d = s.config.speculative.enabled() ? s.options.drafter : nullptr;
    if (d && !d->moe_layers().empty())
      s.draft_placement = std::make_shared<const runtime::eplb::ExpertPlacement>(
          runtime::eplb::ep_default_placement(
              static_cast<int64_t>(d->moe_layers().size()),
              static_cast<int64_t>(d->moe_layers().front()->size()),
              s.options.member ? s.options.member->size : s.size(),
              s.options.num_redundant_experts));
  }
  self->set_exit_handler([=](caf::exit_msg& msg) { on_exit(self, msg); });
  self->set_down_handler([=](caf::down_msg& msg) { on_down(self, msg); });
  s.options.health->set_starting();
  start(self);
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor client) {
        route_generate(self, req, client);
      },
      // A request's rank is the scheduler's business: every scheduler hears the abort
      // (unknown ids are ignored; aborts are rare).
      [=](abort_atom, runtime::RequestId id) {
        auto& st = self->state;
        if (st.probing || !st.routing.empty() || st.placing_imports.contains(id))
          st.routing_aborts.insert(id);
        for (const Member& m : st.members)
          if (m.scheduler) self->send(m.scheduler, abort_atom::value, id);
      },
      [=](fail_atom, runtime::RequestId id, std::string& why) {
        for (const Member& m : self->state.members)
          if (m.scheduler) self->send(m.scheduler, fail_atom::value, id, why);
      },
      [=](stats_atom) { return gather_figures(self); },
      // The instance's load and cached prefix of a prompt, for the cluster router's
      // cache-aware choice: its requests summed, the longest prefix any rank holds.
      [=](probe_atom, std::vector<int32_t>& prompt) -> caf::result<runtime::RankLoad> {
        auto& s = self->state;
        if (s.members.empty() || !s.ending.empty()) return runtime::RankLoad{};
        if (s.size() == 1) return self->delegate(s.members.front().scheduler, probe_atom::value, std::move(prompt));
        auto rp = self->make_response_promise<runtime::RankLoad>();
        auto total = std::make_shared<runtime::RankLoad>();
        auto left = std::make_shared<int>(s.size());
        auto got = [=](runtime::RankLoad l) mutable {
          total->requests += l.requests;
          total->cached_tokens = std::max(total->cached_tokens, l.cached_tokens);
          if (--*left == 0) rp.deliver(*total);
        };
        for (const Member& m : s.members)
          if (!m.scheduler) got({});
          else self->request(m.scheduler, std::chrono::seconds(5), probe_atom::value, prompt)
              .then([=](runtime::RankLoad l) mutable { got(l); },
                    [=](caf::error&) mutable { got({}); });
        return rp;
      },
      // KV hand-off (docs/pd.md): from the rank that parked it, to the rank that fits
      // (instance_handoff.cpp).
      [=](handoff_atom, runtime::RequestId id, caf::actor target) {
        return route_handoff(self, id, std::move(target));
      },
      [=](park_atom, runtime::RequestId id) {  // drain: whichever rank holds it parks it
        for (const Member& m : self->state.members)
          if (m.scheduler) self->send(m.scheduler, park_atom::value, id);
      },
      [=](import_atom, GenerateRequest& req, KvHandoffBytes& bytes, caf::actor client) {
        return route_import(self, req, std::move(bytes), std::move(client));
      },
      [=](import_atom, GenerateRequest& req, KvHandoffValue& v, caf::actor client) {
        return route_import(self, req, std::move(v), std::move(client));  // its put landed
      },
      // The transfer agent receives hand-offs by RMA (docs/pd.md "The transfer agent").
      [=](kvreserve_atom, uint64_t bytes) -> caf::result<KvLease> {
        auto& st = self->state;
        std::string why = handoffs_refused(st);
        if (!why.empty() || !st.agent) return KvLease{0, {}, 0, {}, why.empty() ? "no agent" : why};
        return self->delegate(st.agent, kvreserve_atom::value, bytes);
      },
      [=](kvcommit_atom, uint64_t lease, GenerateRequest& req, KvHandoffBytes& header,
          caf::actor client) -> caf::result<std::string> {
        auto& st = self->state;
        if (!st.agent) return std::string("the engine is restarting (" + st.ending + ")");
        return self->delegate(st.agent, kvcommit_atom::value, lease, std::move(req),
                              std::move(header), std::move(client));
      },
      [=](kvrelease_atom, uint64_t lease) {
        if (const auto& agent = self->state.agent) self->send(agent, kvrelease_atom::value, lease);
      },
      // An instance spread over processes (group_member.cpp).
      [=](join_atom, GroupJoin& join) { return on_join(self, join); },
      [=](address_atom, int64_t incarnation, std::vector<uint8_t>& address) {
        on_address(self, incarnation, std::move(address));
      },
      [=](formed_atom, int64_t incarnation, const std::string& error) {
        on_formed(self, incarnation, error);
      },
      [=](dial_atom, uint64_t incarnation) { retry_join(self, static_cast<int64_t>(incarnation)); },
  };
}

}  // namespace

scheduler_actor spawn_engine(caf::actor_system& sys, const model::BatchForward& forward,
                             const model::TextTokenizer* tokenizer, runtime::EngineConfig config,
                             EngineOptions options) {
  TROUPE_CHECK(options.data_parallel_size >= 1, "data-parallel-size must be >= 1, got ",
               options.data_parallel_size);
  TROUPE_CHECK(options.num_redundant_experts == 0 || options.expert_parallel,
               "num-redundant-experts needs enable-expert-parallel");
  TROUPE_CHECK(!options.expert_parallel ||
                   (forward.shape().expert_parallel && model::routed_expert_count(forward) > 0),
               "enable-expert-parallel: the model has no routed experts (a dense model "
               "serves with data-parallel-size alone)");
  TROUPE_CHECK(!options.eplb.enabled || options.expert_parallel,
               "enable-eplb needs enable-expert-parallel");
  TROUPE_CHECK(options.expert_counts_file.empty() || options.expert_parallel,
               "expert-counts-file needs enable-expert-parallel");
  // Opened here, once: an error names the file at start-up, not in an actor.
  std::shared_ptr<runtime::eplb::CountsRecorder> counts;
  if (!options.expert_counts_file.empty())
    counts = std::make_shared<runtime::eplb::CountsRecorder>(options.expert_counts_file);
  TROUPE_CHECK(options.eplb.window_size >= 1 && options.eplb.step_interval >= 1,
               "eplb-config: window_size and step_interval must be >= 1, got ",
               options.eplb.window_size, " and ", options.eplb.step_interval);
  if (const auto& m = options.member) {
#ifndef TROUPE_HAVE_UCX
    TROUPE_FAIL("instance '" << m->instance << "': its ranks are processes of their own, "
                "whose MoE exchange needs UCX, and this build has none (libucx-dev)");
#endif
    TROUPE_CHECK(m->size >= 2 && m->rank >= 0 && m->rank < m->size, "instance '", m->instance,
                 "': rank ", m->rank, " of ", m->size);
    TROUPE_CHECK(options.data_parallel_size == 1 && options.expert_parallel,
                 "a rank of an instance spread over processes is one expert-parallel rank");
    TROUPE_CHECK(!options.eplb.enabled && options.expert_counts_file.empty(),
                 "instance '", m->instance, "': enable-eplb and expert-counts-file need the "
                 "instance's ranks in one process for now");
  }
  TROUPE_CHECK(!config.speculative.enabled() || options.drafter != nullptr,
               "speculative-config: method \"", config.speculative.method,
               "\" has no drafter in this engine");
  // The ranks in this process share its host and disk tier budgets and its kernel
  // threads; each has a disk folder of its own named by its rank in the instance
  // (runtime/dep/rank_tiers.h).
  const int group_size = options.member ? options.member->size : options.data_parallel_size;
  config = runtime::rank_share(std::move(config), options.data_parallel_size);
  // Checked here, on the caller's thread: a config that cannot work stops start-up with
  // the numbers instead of killing the first request.
  const runtime::KvCacheConfig kv = runtime::prepare_engine(forward.shape(), config);
  if (kv.disk_blocks > 0)
    for (int r = 0; r < options.data_parallel_size; ++r)
      runtime::ensure_disk_dir(runtime::rank_disk_dir(
          config.kv_disk_dir, options.member ? options.member->rank : r, group_size));
  if (!options.health) options.health = std::make_shared<InstanceHealth>();
  return caf::actor_cast<scheduler_actor>(sys.spawn(supervisor_fun, &forward, tokenizer,
                                                    std::move(config), kv, std::move(options),
                                                    std::move(counts)));
}

}  // namespace troupe::actors
