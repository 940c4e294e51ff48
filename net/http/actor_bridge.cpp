#include "net/http/actor_bridge.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <chrono>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

namespace troupe::net::http {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Live generation actors, so shutdown can abort or end them all.
class Registry {
 public:
  void add(uint64_t key, caf::actor a) {
    std::lock_guard lock(mutex_);
    live_[key] = std::move(a);
  }
  void remove(uint64_t key) {
    std::lock_guard lock(mutex_);
    live_.erase(key);
  }
  std::vector<caf::actor> all() const {
    std::lock_guard lock(mutex_);
    std::vector<caf::actor> out;
    for (const auto& [k, a] : live_) out.push_back(a);
    return out;
  }
  int64_t size() const {
    std::lock_guard lock(mutex_);
    return static_cast<int64_t>(live_.size());
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, caf::actor> live_;
};

// One generation's progress, for the sink and the per-request metrics.
struct GenState {
  std::vector<runtime::RequestId> ids;  // [n] engine request of each choice
  std::vector<bool> finished;           // [n]
  std::vector<Clock::time_point> last;  // [n] time of the choice's previous output
  std::vector<bool> started;            // [n] has produced a token
  std::vector<double> queue_seconds;    // [n] arrival to first output (an upper bound)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;   // over all choices
  double ttft_seconds = -1;    // of the first token of any choice; -1: none yet
  std::string finish_reasons;  // "stop,length" (one per choice, in choice order)
  Clock::time_point arrival = Clock::now();
  int32_t open = 0;  // choices not finished
};

void record_output(metrics::ServingMetrics& m, GenState& g, int32_t i,
                   const runtime::RequestOutput& out) {
  const auto n = static_cast<int64_t>(out.new_tokens.size());
  g.output_tokens += n;
  if (n > 0 && g.ttft_seconds < 0) g.ttft_seconds = seconds_since(g.arrival);
  if (n > 0 && !g.started[i]) {
    m.record_first_token(i == 0 ? g.prompt_tokens : 0, seconds_since(g.arrival));
    if (n > 1) m.generation_tokens.inc(double(n - 1));
    g.started[i] = true;
    g.queue_seconds[i] = seconds_since(g.arrival);
  } else if (n > 0) {
    m.record_tokens(n, seconds_since(g.last[i]));
  }
  g.last[i] = Clock::now();
  // The scheduler does not report admission times yet: the time to the first output is
  // the upper bound recorded as queue time (docs/serve.md).
  if (!out.finished()) return;
  m.record_finished(out.finish_reason(), seconds_since(g.arrival),
                    g.started[i] ? g.queue_seconds[i] : seconds_since(g.arrival));
  if (out.status == runtime::RequestStatus::FinishedError) {
    const std::string_view cause = runtime::to_string(out.error_cause);
    m.request_errors(cause).inc();
    spdlog::warn("request {} failed ({}): {}", out.id, cause, out.error);
  }
}

// One line per request (all its choices) at info, as vLLM logs each request.
void log_finished(const GenState& g) {
  spdlog::info("request {} finished: {} prompt_tokens={} output_tokens={} ttft={:.3f}s e2e={:.3f}s",
               g.ids.front(), g.finish_reasons, g.prompt_tokens, g.output_tokens,
               g.ttft_seconds < 0 ? 0.0 : g.ttft_seconds, seconds_since(g.arrival));
}

caf::behavior generation_fun(caf::event_based_actor* self, actors::router_actor router,
                             std::vector<actors::GenerateRequest> choices, int64_t prompt_tokens,
                             EngineBridge::Sink sink, metrics::ServingMetrics* m) {
  auto g = std::make_shared<GenState>();
  const size_t n = choices.size();
  g->finished.assign(n, false);
  g->started.assign(n, false);
  g->queue_seconds.assign(n, 0.0);
  g->last.assign(n, g->arrival);
  g->prompt_tokens = prompt_tokens;
  g->open = static_cast<int32_t>(n);
  std::unordered_map<runtime::RequestId, int32_t> index;
  // One group: the engine prefills the prompt once and forks the other choices from it.
  actors::GenerateRequest group = std::move(choices.front());
  for (size_t i = 0; i < n; ++i) {
    const runtime::RequestId id = i == 0 ? group.id : choices[i].id;
    g->ids.push_back(id);
    index[id] = static_cast<int32_t>(i);
    if (i > 0) group.siblings.push_back({id, std::move(choices[i].params)});
  }
  self->send(router, actors::generate_atom::value, std::move(group),
             caf::actor_cast<caf::actor>(self));
  return {
      [=](actors::token_atom, actors::TokenEvent& e) {
        const auto it = index.find(e.output.id);
        if (it == index.end() || g->finished[it->second]) return;
        const int32_t i = it->second;
        record_output(*m, *g, i, e.output);
        if (e.output.finished()) {
          g->finished[i] = true;
          g->open -= 1;
          if (!g->finish_reasons.empty()) g->finish_reasons += ',';
          g->finish_reasons += e.output.finish_reason();
        }
        sink(i, std::move(e.output));
        if (g->open == 0) {
          log_finished(*g);
          self->quit();
        }
      },
      [=](actors::abort_atom) {
        for (size_t i = 0; i < g->ids.size(); ++i)
          if (!g->finished[i]) self->send(router, actors::abort_atom::value, g->ids[i]);
      },
      [=](actors::fail_atom, const std::string& why) {
        for (size_t i = 0; i < g->ids.size(); ++i)
          if (!g->finished[i]) self->send(router, actors::fail_atom::value, g->ids[i], why);
      },
  };
}

// The one-shot actor of a /metrics scrape: asks the engine for its snapshot, hands it
// (or nullopt on timeout) to `done`, quits. Its inputs are spawn arguments, not lambda
// captures: CAF 0.17.6 spawns an actor function without arguments by dereferencing a
// null argument tuple (UBSan "reference binding to null pointer",
// caf/detail/init_fun_factory.hpp:85), which halts a sanitized daemon.
using SnapshotDone = std::function<void(std::optional<runtime::EngineFigures>)>;
caf::behavior scrape_fun(caf::event_based_actor* self, actors::router_actor router,
                         SnapshotDone done) {
  self->request(router, std::chrono::seconds(5), actors::stats_atom::value)
      .then(
          [=](const runtime::EngineFigures& snap) {
            done(snap);
            self->quit();
          },
          [=](caf::error&) {
            done(std::nullopt);
            self->quit();
          });
  return {[](actors::stats_atom) {}};  // the reply above is all it waits for
}

// A one-shot asker of the router's drain (same shape as scrape_fun).
using DrainDone = std::function<void(EngineBridge::DrainResult)>;
caf::behavior drain_fun(caf::event_based_actor* self, actors::router_actor router,
                        std::string instance, DrainDone done) {
  self->request(caf::actor_cast<caf::actor>(router), std::chrono::seconds(10),
                actors::drain_atom::value, instance)
      .then(
          [=](const std::string& why, int64_t requests) {
            done({why, requests});
            self->quit();
          },
          [=](caf::error& err) {
            done({err == caf::sec::unexpected_message
                      ? std::string("drain needs a cluster router (troupe serve --config FILE --node NAME)")
                      : "the router did not answer: " + self->home_system().render(err),
                  0});
            self->quit();
          });
  return {[](actors::drain_atom) {}};  // the reply above is all it waits for
}

class ActorGeneration : public Generation {
 public:
  ActorGeneration(caf::actor a, int64_t id) : actor_(std::move(a)), id_(id) {}
  void abort() override { caf::anon_send(actor_, actors::abort_atom::value); }
  int64_t request_id() const override { return id_; }

 private:
  caf::actor actor_;
  int64_t id_;
};

class ActorBridge : public EngineBridge {
 public:
  ActorBridge(caf::actor_system& sys, actors::router_actor router, metrics::ServingMetrics& m,
              std::shared_ptr<const actors::InstanceHealth> health)
      : sys_(sys), router_(std::move(router)), metrics_(m), health_(std::move(health)) {}

  std::shared_ptr<Generation> generate(const openai::GenerationRequest& req, Sink sink) override {
    const uint64_t seed = req.seed ? *req.seed : std::random_device{}();
    std::vector<actors::GenerateRequest> choices;
    for (int32_t i = 0; i < req.n; ++i) {
      actors::GenerateRequest c;
      c.id = next_id_.fetch_add(1);
      c.prompt = req.prompt_tokens;
      c.params = req.params;
      c.params.sampling.seed = seed + static_cast<uint64_t>(i);
      choices.push_back(std::move(c));
    }
    const uint64_t key = static_cast<uint64_t>(choices.front().id);
    auto prompt_tokens = static_cast<int64_t>(req.prompt_tokens.size());
    spdlog::info("request {} started: n={} prompt_tokens={} max_tokens={}", key, req.n,
                 prompt_tokens, req.params.max_tokens);
    caf::actor a = sys_.spawn(generation_fun, router_, std::move(choices), prompt_tokens,
                              std::move(sink), &metrics_);
    live_.add(key, a);
    a->attach_functor([this, key] { live_.remove(key); });
    return std::make_shared<ActorGeneration>(std::move(a), static_cast<int64_t>(key));
  }

  void engine_state(std::function<void(std::optional<runtime::EngineFigures>)> done) override {
    sys_.spawn(scrape_fun, router_,
               SnapshotDone([this, done = std::move(done)](std::optional<runtime::EngineFigures> s) {
                 if (!s) return done(std::nullopt);
                 update_metrics(*s);
                 done(*s);
               }));
  }

  void drain(const std::string& instance, std::function<void(DrainResult)> done) override {
    sys_.spawn(drain_fun, router_, instance, DrainDone(std::move(done)));
  }

  std::optional<std::string> unhealthy_reason() const override {
    return health_ ? health_->problem() : std::nullopt;
  }
  int64_t in_flight() const override { return live_.size(); }
  void fail_all(const std::string& why) override {
    for (const caf::actor& a : live_.all()) caf::anon_send(a, actors::fail_atom::value, why);
  }
  void kill_all() override {
    for (const caf::actor& a : live_.all()) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

 private:
  // Copies the scheduler's snapshot into the metrics: gauges as they are, cumulative
  // counts as the difference to the last scrape, each step not yet seen into the histograms.
  void update_metrics(const runtime::EngineFigures& s) {
    std::lock_guard lock(mutex_);
    metrics_.num_requests_running.set(double(s.running));
    metrics_.num_requests_waiting.set(double(s.waiting));
    metrics_.kv_cache_usage_perc.set(s.kv_usage);
    metrics_.kv_cache_used_blocks.set(double(s.used_blocks));
    advance(metrics_.num_preemptions, s.preemptions, seen_.preemptions);
    advance(metrics_.failed_steps, s.failed_steps, seen_.failed_steps);
    advance(metrics_.engine_restarts, s.restarts, seen_.restarts);
    if (s.rank_busy_seconds > seen_.rank_busy_seconds)
      metrics_.rank_busy_seconds.inc(s.rank_busy_seconds - seen_.rank_busy_seconds);
    seen_.rank_busy_seconds = std::max(seen_.rank_busy_seconds, s.rank_busy_seconds);
    advance(metrics_.prefix_cache_queries, s.prefix_query_tokens, seen_.prefix_query_tokens);
    advance(metrics_.prefix_cache_hits, s.prefix_hit_tokens, seen_.prefix_hit_tokens);
    for (size_t t = 0; t < 3; ++t) {
      advance(*metrics_.prefix_cache_hits_by_tier[t], s.prefix_tier_hit_tokens[t],
              seen_.prefix_tier_hit_tokens[t]);
      metrics_.kv_cache_tier_bytes[t]->set(double(s.tier_bytes[t]));
    }
    advance(metrics_.prefix_cache_snapshot_hits, s.prefix_snapshot_hits,
            seen_.prefix_snapshot_hits);
    advance(metrics_.prefix_cache_replay_hits, s.prefix_replay_hits, seen_.prefix_replay_hits);
    advance(metrics_.prefix_cache_replay_tokens, s.prefix_replay_tokens,
            seen_.prefix_replay_tokens);
    metrics_.kv_saved_prefixes.set(double(s.kv_pins));
    metrics_.kv_pinned_bytes.set(double(s.kv_pinned_bytes));
    advance(metrics_.kv_restore_hits, s.kv_restore_hits, seen_.kv_restore_hits);
    if (s.eplb_rebalances > 0) {
      const metrics::ServingMetrics::EplbSeries e = metrics_.eplb("target");
      advance(e.rebalances, s.eplb_rebalances, seen_.eplb_rebalances);
      e.balance_before.set(s.eplb_balance_before);
      e.balance_after.set(s.eplb_balance_after);
    }
    if (s.eplb_draft_rebalances > 0) {
      const metrics::ServingMetrics::EplbSeries e = metrics_.eplb("draft");
      advance(e.rebalances, s.eplb_draft_rebalances, seen_.eplb_draft_rebalances);
      e.balance_before.set(s.eplb_draft_balance_before);
      e.balance_after.set(s.eplb_draft_balance_after);
    }
    advance_spec_decode(s);
    advance_kv_transfers(s);
    if (s.per_rank.empty()) return observe_steps(s, seen_.steps);
    if (!s.per_rank.front().instance.empty()) return update_instances(s);
    // R ranks: each numbers its own steps, so each has its own cursor.
    seen_rank_steps_.resize(s.per_rank.size(), 0);
    for (size_t r = 0; r < s.per_rank.size(); ++r) {
      const runtime::EngineFigures& f = s.per_rank[r];
      const metrics::ServingMetrics::RankGauges g = metrics_.rank_gauges(static_cast<int>(r));
      g.running.set(double(f.running));
      g.waiting.set(double(f.waiting));
      g.kv_usage.set(f.kv_usage);
      g.used_blocks.set(double(f.used_blocks));
      observe_steps(f, seen_rank_steps_[r]);
    }
  }

  // A cluster router's figures: each instance's series, its cursors kept by name.
  void update_instances(const runtime::EngineFigures& s) {
    for (const runtime::EngineFigures& f : s.per_rank) {
      const metrics::ServingMetrics::InstanceSeries m = metrics_.instance_series(f.instance);
      m.gauges.running.set(double(f.running));
      m.gauges.waiting.set(double(f.waiting));
      m.gauges.kv_usage.set(f.kv_usage);
      m.gauges.used_blocks.set(double(f.used_blocks));
      InstanceSeen& seen = seen_instances_[f.instance];
      advance(m.prefix_cache_queries, f.prefix_query_tokens, seen.queries);
      advance(m.prefix_cache_hits, f.prefix_hit_tokens, seen.hits);
      observe_steps(f, seen.steps);
    }
  }

  // Each step of `f` past `seen` into the per-step histograms; seen moves on.
  void observe_steps(const runtime::EngineFigures& f, int64_t& seen) {
    for (const runtime::StepSample& step : f.recent_steps) {
      if (step.step <= seen) continue;
      metrics_.num_requests_admitted_per_step.observe(double(step.admitted));
      metrics_.scheduler_step_time.observe(step.plan_seconds);
    }
    seen = std::max(seen, f.steps);
  }

  // The KV hand-offs since the last scrape: counters, and the transfer-time buckets.
  void advance_kv_transfers(const runtime::EngineFigures& s) {
    advance(metrics_.kv_transfer_bytes, s.kv_transfer_bytes, seen_.kv_transfer_bytes);
    advance(metrics_.kv_transfer_fallbacks, s.kv_transfer_fallbacks, seen_.kv_transfer_fallbacks);
    advance(metrics_.kv_transfers_rma, s.kv_transfer_rma, seen_.kv_transfer_rma);
    advance(metrics_.kv_transfers_message, s.kv_transfer_messages, seen_.kv_transfer_messages);
    advance(metrics_.kv_transfer_descriptors, s.kv_transfer_descriptors, seen_.kv_transfer_descriptors);
    advance(metrics_.kv_transfer_leases_expired, s.kv_transfer_leases_expired,
            seen_.kv_transfer_leases_expired);
    advance(metrics_.kv_handoff_phased, s.kv_handoff_phased, seen_.kv_handoff_phased);
    for (size_t k = 0; k < runtime::kKvHandoffPhaseNames.size(); ++k) {
      const double more = s.kv_handoff_phase_seconds[k] - seen_.kv_handoff_phase_seconds[k];
      if (more > 0) metrics_.kv_handoff_phase_seconds[k]->inc(more);
      seen_.kv_handoff_phase_seconds[k] = std::max(seen_.kv_handoff_phase_seconds[k], s.kv_handoff_phase_seconds[k]);
    }
    for (size_t c = 0; c < runtime::kKvTransferFailureNames.size(); ++c)
      advance(*metrics_.kv_transfer_failures[c], s.kv_transfer_failures[c],
              seen_.kv_transfer_failures[c]);
    std::vector<int64_t>& seen = seen_.kv_transfer_seconds_buckets;
    seen.resize(std::max(seen.size(), s.kv_transfer_seconds_buckets.size()), 0);
    std::vector<int64_t> more(s.kv_transfer_seconds_buckets.size(), 0);
    for (size_t b = 0; b < more.size(); ++b) {
      more[b] = std::max<int64_t>(0, s.kv_transfer_seconds_buckets[b] - seen[b]);
      seen[b] = std::max(seen[b], s.kv_transfer_seconds_buckets[b]);
    }
    metrics_.kv_transfer_seconds.add(more, std::max(0.0, s.kv_transfer_seconds_sum -
                                                             seen_.kv_transfer_seconds_sum));
    seen_.kv_transfer_seconds_sum = std::max(seen_.kv_transfer_seconds_sum, s.kv_transfer_seconds_sum);
  }

  // The speculative-decoding counts since the last scrape (vLLM's spec_decode_* series).
  void advance_spec_decode(const runtime::EngineFigures& s) {
    auto delta = [](int64_t now, int64_t& seen) {
      const int64_t d = std::max<int64_t>(0, now - seen);
      seen = std::max(seen, now);
      return d;
    };
    const std::vector<int64_t>& now = s.spec_accepted_per_pos;
    std::vector<int64_t>& seen = seen_.spec_accepted_per_pos;
    seen.resize(std::max(now.size(), seen.size()), 0);
    std::vector<int64_t> per_pos(now.size(), 0);
    for (size_t i = 0; i < now.size(); ++i) per_pos[i] = delta(now[i], seen[i]);
    const int64_t drafts = delta(s.spec_num_drafts, seen_.spec_num_drafts);
    const int64_t draft_tokens = delta(s.spec_num_draft_tokens, seen_.spec_num_draft_tokens);
    const int64_t accepted = delta(s.spec_num_accepted_tokens, seen_.spec_num_accepted_tokens);
    if (drafts > 0 || draft_tokens > 0 || accepted > 0)
      metrics_.record_spec_decode(drafts, draft_tokens, accepted, per_pos);
  }

  struct InstanceSeen {
    int64_t queries = 0, hits = 0, steps = 0;
  };
  std::map<std::string, InstanceSeen> seen_instances_;

  static void advance(metrics::Counter& c, int64_t now, int64_t& seen) {
    if (now > seen) c.inc(double(now - seen));
    seen = std::max(seen, now);
  }

  caf::actor_system& sys_;
  actors::router_actor router_;
  metrics::ServingMetrics& metrics_;
  std::shared_ptr<const actors::InstanceHealth> health_;
  std::atomic<runtime::RequestId> next_id_{0};
  Registry live_;
  std::mutex mutex_;
  runtime::EngineFigures seen_;  // the scheduler's cumulative counts at the last update
  std::vector<int64_t> seen_rank_steps_;  // R > 1 ranks: each rank's last step seen
};

}  // namespace

std::unique_ptr<EngineBridge> make_engine_bridge(
    caf::actor_system& sys, actors::router_actor router, metrics::ServingMetrics& metrics,
    std::shared_ptr<const actors::InstanceHealth> health) {
  return std::make_unique<ActorBridge>(sys, std::move(router), metrics, std::move(health));
}

}  // namespace troupe::net::http
