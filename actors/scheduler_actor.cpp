// The scheduler actor: plans steps (runtime::Scheduler), sends them to the rank, streams
// each request's outputs to its client. A failed step fails its requests with the
// rank's error; request-timeout fails a request that runs too long. Its clients and
// counts live in the EngineLedger so the supervisor can end them if this actor dies.
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "actors/engine_parts.h"
#include "kernels/check.h"

namespace troupe::actors {
namespace {

struct SchedulerState {
  std::unique_ptr<runtime::KvCacheManager> kv;
  std::unique_ptr<runtime::Scheduler> scheduler;
  std::unique_ptr<runtime::StepPipeline> pipeline;  // counts into ledger->counters
  std::shared_ptr<EngineLedger> ledger;
  rank_actor rank;
  double request_timeout = 0;
};

using scheduler_pointer = scheduler_core_actor::stateful_pointer<SchedulerState>;

void stream(scheduler_pointer self, std::vector<runtime::RequestOutput> outputs) {
  auto& clients = self->state.ledger->clients;
  for (runtime::RequestOutput& out : outputs) {
    auto it = clients.find(out.id);
    if (it == clients.end()) continue;
    const bool last = out.finished();
    caf::anon_send(it->second, token_atom::value, TokenEvent{std::move(out)});  // untyped client
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

void on_step_result(scheduler_pointer self, const StepResult& result) {
  auto& s = self->state;
  stream(self, result.error.empty() ? s.pipeline->complete(result.sampled, result.run_seconds)
                                    : fail_step(s, result));
  count_prefix_cache(s);
  if (s.scheduler->has_unfinished()) kick(self);
}

// Sends the rank every plan the pipeline has room for (one, or two with async
// scheduling: the next plan is made while the rank runs the current one). The rank
// answers in order, so results complete the pipeline's plans oldest first.
void kick(scheduler_pointer self) {
  auto& st = self->state;
  std::vector<runtime::RequestOutput> finished;  // outside a step: aborts, failures
  while (const runtime::StepPlan* plan = st.pipeline->plan_next(finished)) {
    self->request(st.rank, caf::infinite, run_atom::value, *plan)
        .then([=](const StepResult& result) { on_step_result(self, result); },
              [=](caf::error& err) {  // the rank is gone: the supervisor restarts us both
                self->state.ledger->death = "rank died: " + describe(self->home_system(), err);
                self->quit(err);
              });
  }
  stream(self, std::move(finished));
}

// Adds the request (and its n > 1 siblings) or answers each with the reason it was refused.
void add(scheduler_pointer self, GenerateRequest& req, const caf::actor& client) {
  auto& s = self->state;
  std::vector<runtime::RequestId> ids{req.id};
  for (const runtime::Sibling& sib : req.siblings) ids.push_back(sib.id);
  try {
    s.scheduler->add_request(req.id, req.prompt, std::move(req.params), std::move(req.siblings));
  } catch (const troupe::Error& e) {  // bad input: answer the requester, keep serving
    spdlog::warn("scheduler: request {} refused: {}", req.id, e.what());
    for (runtime::RequestId id : ids)
      send_error(client, id, e.what(), runtime::ErrorCause::BadRequest);
    return;
  }
  for (runtime::RequestId id : ids) {
    s.ledger->clients[id] = client;
    if (s.request_timeout > 0)
      self->delayed_send(self, std::chrono::microseconds(std::llround(s.request_timeout * 1e6)),
                         timeout_atom::value, id);
  }
  kick(self);
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

scheduler_core_actor::behavior_type scheduler_fun(
    scheduler_pointer self, const model::Forward* forward, const model::Tokenizer* tokenizer,
    runtime::EngineConfig config, runtime::KvCacheConfig kv, rank_actor rank,
    std::shared_ptr<EngineLedger> ledger, double request_timeout,
    std::shared_ptr<runtime::TierStorage> tiers) {
  auto& st = self->state;
  st.kv = std::make_unique<runtime::KvCacheManager>(kv);
  if (tiers) runtime::attach_disk_tier(*st.kv, *tiers);  // before the rank sees a plan
  st.scheduler = std::make_unique<runtime::Scheduler>(
      config.scheduler, *st.kv, static_cast<int32_t>(forward->config().eos_token_id), tokenizer);
  st.rank = std::move(rank);
  st.ledger = std::move(ledger);
  st.pipeline = std::make_unique<runtime::StepPipeline>(*st.scheduler, st.ledger->counters,
                                                        config.async_scheduling ? 2 : 1);
  st.request_timeout = request_timeout;
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
  caf::anon_send(client, token_atom::value, TokenEvent{std::move(out)});
}

scheduler_core_actor spawn_scheduler(caf::actor_system& sys, const model::Forward& forward,
                                     const model::Tokenizer* tokenizer,
                                     const runtime::EngineConfig& config,
                                     const runtime::KvCacheConfig& kv, rank_actor rank,
                                     std::shared_ptr<EngineLedger> ledger, double request_timeout,
                                     std::shared_ptr<runtime::TierStorage> tiers) {
  return sys.spawn(scheduler_fun, &forward, tokenizer, config, kv, std::move(rank),
                   std::move(ledger), request_timeout, std::move(tiers));
}

}  // namespace troupe::actors
