#include "actors/engine_actors.h"

#include <chrono>
#include <deque>
#include <memory>
#include <unordered_map>

#include "kernels/check.h"

namespace troupe::actors {
namespace {

// --- rank: runs step plans on the model ----------------------------------------------
struct RankState {
  std::unique_ptr<runtime::PagedKvStorage> storage;
  std::unique_ptr<runtime::Executor> executor;
};

rank_actor::behavior_type rank_fun(rank_actor::stateful_pointer<RankState> self,
                                   const model::Forward* forward, runtime::KvCacheConfig kv,
                                   runtime::ExecutorOptions options) {
  self->state.storage = std::make_unique<runtime::PagedKvStorage>(
      forward->config(), kv.block_size, kv.num_blocks, kv.swa_slots);
  self->state.executor =
      std::make_unique<runtime::Executor>(*forward, *self->state.storage, options);
  return {[=](run_atom, const runtime::StepPlan& plan) -> StepResult {
    StepResult r;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      r.sampled = self->state.executor->run(plan);
    } catch (const std::exception& e) {  // a failed step must not take the engine down
      r.error = e.what();
      r.sampled.assign(plan.chunks.size(), {});
    }
    r.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }};
}

// --- scheduler: plans steps, streams outputs -----------------------------------------
struct SchedulerState {
  std::unique_ptr<runtime::KvCacheManager> kv;
  std::unique_ptr<runtime::Scheduler> scheduler;
  std::unordered_map<runtime::RequestId, caf::actor> reply_to;
  rank_actor rank;
  int in_flight = 0;      // plans sent to the rank and not answered yet
  int max_in_flight = 1;  // 2 with async scheduling: plan N+1 while the rank runs N
  EngineSnapshot counters;              // steps, preemptions, admitted; recent_steps unused
  std::deque<StepSample> recent_steps;  // [<= kMaxRecentSteps] oldest first
};

using scheduler_pointer = scheduler_actor::stateful_pointer<SchedulerState>;

void stream(scheduler_pointer self, std::vector<runtime::RequestOutput> outputs) {
  auto& st = self->state;
  for (runtime::RequestOutput& out : outputs) {
    auto it = st.reply_to.find(out.id);
    if (it == st.reply_to.end()) continue;
    const bool last = out.finished();
    caf::anon_send(it->second, token_atom::value, TokenEvent{std::move(out)});  // untyped client
    if (last) st.reply_to.erase(it);
  }
}

void record_step(SchedulerState& st, const runtime::StepPlan& plan, double plan_seconds) {
  st.counters.steps += 1;
  st.counters.preemptions += static_cast<int64_t>(plan.preempted.size());
  st.counters.admitted += plan.num_admitted;
  st.recent_steps.push_back({st.counters.steps, plan.num_admitted, plan_seconds});
  if (st.recent_steps.size() > EngineSnapshot::kMaxRecentSteps) st.recent_steps.pop_front();
}

// Plans steps while the rank has room for them (one, or two with async scheduling: the
// next plan is made while the rank runs the current one). An empty plan still reports
// requests that finished outside a step. The rank answers in order, so update() sees
// the plans in the order they were made.
void kick(scheduler_pointer self) {
  auto& st = self->state;
  while (st.in_flight < st.max_in_flight) {
    const auto t0 = std::chrono::steady_clock::now();
    runtime::StepPlan plan = st.scheduler->schedule();
    const double plan_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (plan.empty()) {
      stream(self, st.scheduler->update(plan, {}));
      return;
    }
    ++st.in_flight;
    record_step(st, plan, plan_seconds);
    self->request(st.rank, caf::infinite, run_atom::value, plan)
        .then(
            [=](StepResult& result) {
              auto& s = self->state;
              --s.in_flight;
              s.counters.rank_busy_seconds += result.run_seconds;
              if (!result.error.empty())
                for (const auto& c : plan.chunks) s.scheduler->abort(c.id);
              stream(self, s.scheduler->update(plan, result.sampled));
              if (s.scheduler->has_unfinished()) kick(self);
            },
            [=](caf::error& err) {  // the rank is gone: nothing more can run
              self->quit(err);
            });
  }
}

scheduler_actor::behavior_type scheduler_fun(scheduler_pointer self, const model::Forward* forward,
                                             const model::Tokenizer* tokenizer,
                                             runtime::EngineConfig config) {
  auto& st = self->state;
  const runtime::KvCacheConfig kv = runtime::prepare_engine(forward->config(), config);
  st.kv = std::make_unique<runtime::KvCacheManager>(kv);
  st.scheduler = std::make_unique<runtime::Scheduler>(
      config.scheduler, *st.kv, static_cast<int32_t>(forward->config().eos_token_id), tokenizer);
  st.max_in_flight = config.async_scheduling ? 2 : 1;
  st.rank = self->home_system().spawn<caf::detached>(rank_fun, forward, kv, config.executor);
  self->link_to(st.rank);
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor reply_to) {
        auto& s = self->state;
        std::vector<runtime::RequestId> ids{req.id};
        for (const runtime::Sibling& sib : req.siblings) ids.push_back(sib.id);
        try {
          s.scheduler->add_request(req.id, req.prompt, std::move(req.params),
                                   std::move(req.siblings));
        } catch (const troupe::Error& e) {  // bad input: answer the requester, keep serving
          for (runtime::RequestId id : ids) {
            runtime::RequestOutput out;
            out.id = id;
            out.status = runtime::RequestStatus::FinishedError;
            out.error = e.what();
            caf::anon_send(reply_to, token_atom::value, TokenEvent{std::move(out)});
          }
          return;
        }
        for (runtime::RequestId id : ids) s.reply_to[id] = reply_to;
        kick(self);
      },
      [=](abort_atom, runtime::RequestId id) {
        self->state.scheduler->abort(id);
        kick(self);
      },
      [=](stats_atom) -> EngineSnapshot {
        auto& s = self->state;
        EngineSnapshot snap = s.counters;
        snap.running = static_cast<int64_t>(s.scheduler->running_ids().size());
        snap.waiting = static_cast<int64_t>(s.scheduler->waiting_ids().size());
        snap.used_blocks = s.kv->num_used_blocks();
        snap.free_blocks = s.kv->num_free_blocks();
        snap.kv_usage = s.kv->usage();
        snap.prefix_query_tokens = s.kv->stats().query_tokens;
        snap.prefix_hit_tokens = s.kv->stats().hit_tokens;
        snap.recent_steps.assign(s.recent_steps.begin(), s.recent_steps.end());
        return snap;
      },
  };
}

// --- router ---------------------------------------------------------------------------
struct RouterState {
  std::vector<scheduler_actor> engines;
};

router_actor::behavior_type router_fun(router_actor::stateful_pointer<RouterState> self,
                                       std::vector<scheduler_actor> engines) {
  TROUPE_CHECK(!engines.empty(), "router needs at least one engine");
  self->state.engines = std::move(engines);
  auto pick = [=](runtime::RequestId id) -> scheduler_actor& {
    auto& e = self->state.engines;
    return e[static_cast<size_t>(id) % e.size()];
  };
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor reply_to) {
        self->send(pick(req.id), generate_atom::value, std::move(req), std::move(reply_to));
      },
      // A group lives on its leader's engine, which the id of a sibling does not name:
      // every engine hears the abort (unknown ids are ignored; aborts are rare).
      [=](abort_atom, runtime::RequestId id) {
        for (const scheduler_actor& e : self->state.engines) self->send(e, abort_atom::value, id);
      },
      [=](stats_atom) { return self->delegate(self->state.engines.front(), stats_atom::value); },
  };
}

}  // namespace

scheduler_actor spawn_engine(caf::actor_system& sys, const model::Forward& forward,
                             const model::Tokenizer* tokenizer, runtime::EngineConfig config) {
  return sys.spawn(scheduler_fun, &forward, tokenizer, std::move(config));
}

router_actor spawn_router(caf::actor_system& sys, std::vector<scheduler_actor> engines) {
  return sys.spawn(router_fun, std::move(engines));
}

}  // namespace troupe::actors
