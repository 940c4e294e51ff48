// The supervisor: the engine instance's stable handle. It spawns the rank and the
// scheduler, links to both and traps their exits. When either dies, every request the
// scheduler held (EngineLedger::clients) ends with an error naming the cause, /health
// turns 503 with the reason, and a fresh scheduler + rank start (counted in
// runtime::EngineFigures::restarts); past max_restarts within the window the instance stays
// down and answers new requests with an error.
//
//   rank dies ------> supervisor: send_exit(scheduler) --> scheduler's exit --+
//   scheduler dies ------------------------------------------------------------+--> fail its
//                                      clients, kill the old rank, start both again
//
// The ledger is read only after the scheduler's exit message, so never while it runs.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "actors/engine_parts.h"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

struct SupervisorState {
  const model::Forward* forward = nullptr;
  const model::Tokenizer* tokenizer = nullptr;
  runtime::EngineConfig config;
  runtime::KvCacheConfig kv;
  EngineOptions options;
  std::shared_ptr<EngineLedger> ledger = std::make_shared<EngineLedger>();
  rank_actor rank;
  scheduler_core_actor scheduler;
  std::string rank_death;                  // why the rank died, until its scheduler's exit
  std::deque<Clock::time_point> restarts;  // within options.restart_window_seconds
  std::string down;                        // non-empty: restarted too often, not serving
  // Ranks replaced while their own exit message may still be on its way (the scheduler's
  // exit came first): that message is not the supervisor's own shutdown. The last few.
  std::deque<caf::actor_addr> retired;
};

using supervisor_pointer = scheduler_actor::stateful_pointer<SupervisorState>;

// Spawns rank + scheduler; /health turns ready once the rank answers (until then it
// says "starting", or "restarting" with the cause after a death).
void start(supervisor_pointer self) {
  auto& s = self->state;
  // Fresh tiers per incarnation: the host tier died with the rank; the disk files stay.
  std::shared_ptr<runtime::TierStorage> tiers =
      runtime::make_tier_storage(s.forward->config(), s.config, s.kv);
  s.rank = spawn_rank(self->home_system(), *s.forward, s.kv, s.config.executor, s.options.faults,
                      tiers);
  s.scheduler = spawn_scheduler(self->home_system(), *s.forward, s.tokenizer, s.config, s.kv,
                                s.rank, s.ledger, s.options.request_timeout, tiers);
  self->link_to(s.rank);
  self->link_to(s.scheduler);
  const rank_actor rank = s.rank;
  self->request(rank, caf::infinite, ping_atom::value)
      .then(
          [=](bool) {
            if (self->state.rank == rank) self->state.options.health->set_ready();
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

// The scheduler is gone (on its own, or after its rank): end its requests, restart.
// /health changes first, so a client told of the failure already finds it there.
void on_scheduler_down(supervisor_pointer self, const caf::error& reason) {
  auto& s = self->state;
  std::string why = "scheduler died: " + describe(self->home_system(), reason);
  if (!s.ledger->death.empty()) why = std::exchange(s.ledger->death, {});
  if (!s.rank_death.empty()) why = "rank died: " + std::exchange(s.rank_death, {});
  self->unlink_from(s.rank);  // its exit, if it comes, is not news
  self->send_exit(s.rank, caf::exit_reason::kill);
  if (s.rank) s.retired.push_back(s.rank.address());
  if (s.retired.size() > 8) s.retired.pop_front();
  s.rank = nullptr;
  s.scheduler = nullptr;
  const bool restart = may_restart(s);
  if (restart) {
    s.options.health->set_restarting(why);
  } else {
    s.down = why + " (" + std::to_string(s.options.max_restarts) + " restarts within " +
             fmt::format("{:g}", s.options.restart_window_seconds) +
             " s: max-engine-restarts, engine-restart-window)";
    s.options.health->set_down(s.down);
  }
  auto clients = std::exchange(s.ledger->clients, {});
  spdlog::error("engine: {}; failing {} requests", why, clients.size());
  for (auto& [id, client] : clients)
    send_error(client, id, "the engine failed (" + why + "); the request was lost",
               runtime::ErrorCause::EngineDied);
  s.ledger->prefix_query_base = s.ledger->counters.prefix_query_tokens;
  s.ledger->prefix_hit_base = s.ledger->counters.prefix_hit_tokens;
  s.ledger->snapshot_hit_base = s.ledger->counters.prefix_snapshot_hits;
  s.ledger->replay_hit_base = s.ledger->counters.prefix_replay_hits;
  s.ledger->replay_token_base = s.ledger->counters.prefix_replay_tokens;
  for (int t = 0; t < 3; ++t) s.ledger->tier_hit_base[t] = s.ledger->counters.prefix_tier_hit_tokens[t];
  if (!restart) {
    spdlog::critical("engine: down for good: {}", s.down);
    return;
  }
  s.ledger->counters.restarts += 1;
  spdlog::warn("engine: restarting scheduler and rank (restart {})", s.ledger->counters.restarts);
  start(self);
}

void on_exit(supervisor_pointer self, caf::exit_msg& msg) {
  auto& s = self->state;
  if (s.scheduler && msg.source == s.scheduler.address())
    return on_scheduler_down(self, msg.reason);
  if (s.rank && msg.source == s.rank.address()) {
    s.rank_death = describe(self->home_system(), msg.reason);
    self->send_exit(s.scheduler, msg.reason);  // its requests end once it has stopped
    return;
  }
  const auto stale = std::find(s.retired.begin(), s.retired.end(), msg.source);
  if (stale != s.retired.end()) return void(s.retired.erase(stale));  // already replaced
  self->quit(msg.reason);  // shutdown: the links take the scheduler and the rank along
}

// Forwards a request; one the scheduler never took (it died with it in its mailbox)
// comes back as an error here and is answered.
void forward_generate(supervisor_pointer self, GenerateRequest& req, const caf::actor& client) {
  auto& s = self->state;
  std::vector<runtime::RequestId> ids{req.id};
  for (const runtime::Sibling& sib : req.siblings) ids.push_back(sib.id);
  if (!s.down.empty()) {
    for (runtime::RequestId id : ids)
      send_error(client, id, "the engine is down: " + s.down, runtime::ErrorCause::EngineDied);
    return;
  }
  self->request(s.scheduler, caf::infinite, generate_atom::value, std::move(req), client)
      .then([](bool) {},
            [=](caf::error& err) {
              const std::string why = describe(self->home_system(), err);
              for (runtime::RequestId id : ids)
                send_error(client, id, "the engine failed before taking the request (" + why + ")",
                           runtime::ErrorCause::EngineDied);
            });
}

scheduler_actor::behavior_type supervisor_fun(supervisor_pointer self,
                                              const model::Forward* forward,
                                              const model::Tokenizer* tokenizer,
                                              runtime::EngineConfig config,
                                              runtime::KvCacheConfig kv, EngineOptions options) {
  auto& s = self->state;
  s.forward = forward;
  s.tokenizer = tokenizer;
  s.config = std::move(config);
  s.kv = kv;
  s.options = std::move(options);
  self->set_exit_handler([=](caf::exit_msg& msg) { on_exit(self, msg); });
  s.options.health->set_starting();
  start(self);
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor client) {
        forward_generate(self, req, client);
      },
      [=](abort_atom, runtime::RequestId id) {
        if (self->state.scheduler) self->send(self->state.scheduler, abort_atom::value, id);
      },
      [=](fail_atom, runtime::RequestId id, std::string& why) {
        if (self->state.scheduler)
          self->send(self->state.scheduler, fail_atom::value, id, std::move(why));
      },
      [=](stats_atom) -> caf::result<runtime::EngineFigures> {
        auto& st = self->state;
        if (!st.scheduler) return st.ledger->counters;  // down: the counts so far
        return self->delegate(st.scheduler, stats_atom::value);
      },
  };
}

}  // namespace

scheduler_actor spawn_engine(caf::actor_system& sys, const model::Forward& forward,
                             const model::Tokenizer* tokenizer, runtime::EngineConfig config,
                             EngineOptions options) {
  // Checked here, on the caller's thread: a config that cannot work stops start-up with
  // the numbers instead of killing the first request.
  const runtime::KvCacheConfig kv = runtime::prepare_engine(forward.config(), config);
  if (kv.disk_blocks > 0) runtime::ensure_disk_dir(config.kv_disk_dir);
  if (!options.health) options.health = std::make_shared<InstanceHealth>();
  return sys.spawn(supervisor_fun, &forward, tokenizer, std::move(config), kv, std::move(options));
}

}  // namespace troupe::actors
