// troupe's /metrics set: vLLM's metric names under a "troupe:" prefix, so dashboards
// built for vLLM work after replacing the prefix, plus two of troupe's own (admitted
// requests per step, scheduler step time). Every series carries model_name, as vLLM's do.
//
//   gauges      troupe:num_requests_running, troupe:num_requests_waiting,
//               troupe:kv_cache_usage_perc (0..1, as vLLM),
//               troupe:kv_cache_used_blocks (troupe's own: KV blocks held by requests;
//               0 when idle, so tests and operators can see leaks),
//               troupe:kv_cache_tier_bytes{tier} (troupe's own: bytes the primary pool,
//               host tier and disk tier hold; docs/kv-cache.md "Host and disk tiers"),
//               troupe:kv_saved_prefixes, troupe:kv_pinned_bytes (troupe's own: prefixes
//               saved by POST /v1/kv/save and the bytes they pin; "Saved prefixes")
//   counters    troupe:prefix_cache_queries_total, troupe:prefix_cache_hits_total (tokens;
//               the child without a tier label is the total, vLLM's series; children
//               {tier="primary|host|disk"} split it by the tier that served the hit),
//               troupe:prefix_cache_snapshot_hits_total, troupe:prefix_cache_replay_hits_total
//               (troupe's own: prefix hits, in requests, whose SWA windows came from a
//               window snapshot / from a replay), troupe:prefix_cache_replay_tokens_total
//               (troupe's own: tokens recomputed to rebuild those windows),
//               troupe:kv_restore_hits_total (troupe's own: requests whose kv_restore
//               named a saved prefix),
//               troupe:prompt_tokens_total, troupe:generation_tokens_total,
//               troupe:num_preemptions_total, troupe:request_success_total{finished_reason},
//               troupe:rank_busy_seconds_total (troupe's own: seconds the model ran steps;
//               its rate is the model's utilization, 1.0 = never idle),
//               troupe:request_errors_total{cause} (troupe's own: requests that ended with
//               an error, by runtime::ErrorCause: bad_request no_fit step_failed
//               engine_died timeout shutdown not_found no_room), troupe:failed_steps_total (steps the rank threw
//               on), troupe:engine_restarts_total (scheduler + rank restarted after a death),
//               troupe:slow_client_disconnects_total{api,reason} (troupe's own: connections
//               closed, their requests aborted, because the client did not read: api http
//               or tcp, reason output_limit (max-queued-output-bytes) or write_timeout),
//               troupe:spec_decode_num_drafts_total, troupe:spec_decode_num_draft_tokens_total,
//               troupe:spec_decode_num_accepted_tokens_total,
//               troupe:spec_decode_num_accepted_tokens_per_pos_total{position} (vLLM's
//               speculative decoding counters; position 0 = a step's first draft token),
//               troupe:eplb_rebalances_total{model} (troupe's own: expert placements the
//               ranks switched to, live EPLB; model target or draft, the DSpark draft's
//               MoE balanced apart)
//               troupe:kv_transfer_bytes_total (KV hand-offs this instance sent and the
//               receiver confirmed, P/D and drain: their bytes),
//               troupe:kv_transfer_failures_total{cause} (hand-offs sent that failed: refused
//               timeout receiver_down export no_receiver), troupe:kv_transfer_fallbacks_total
//               (hand-offs received and recomputed instead of loaded: docs/pd.md),
//               troupe:kv_transfers_total{by="rma"|"message"} (hand-offs the transfer
//               agent moved, the region by an RMA put or all in a message),
//               troupe:kv_transfer_descriptors_total (the puts it issued: one a region),
//               troupe:kv_transfer_leases_expired_total (staging regions reserved here
//               whose sender never committed), a cluster router's
//               troupe:kv_handoff_phase_seconds_total{phase="prefill"|"transfer"|
//               "first_decode"} and troupe:kv_handoff_phased_total (its P/D moves' time
//               to first token, the move, the receiver's first tokens: sum / count = mean)
//   per instance  a cluster router's: troupe:num_requests_running, _waiting,
//               troupe:kv_cache_usage_perc, troupe:kv_cache_used_blocks,
//               troupe:prefix_cache_queries_total, troupe:prefix_cache_hits_total, each
//               with label instance (docs/pd.md "Cache-aware routing")
//   gauges (EPLB) troupe:eplb_balance{model,when="before"|"after"} (troupe's own: the planner's
//               mean per-layer balance of its window on the placement before and after the
//               last switch, MODEL.md 9); both EPLB families appear with the first switch
//   histograms  troupe:time_to_first_token_seconds, troupe:inter_token_latency_seconds,
//               troupe:e2e_request_latency_seconds, troupe:request_queue_time_seconds,
//               troupe:num_requests_admitted_per_step, troupe:scheduler_step_time_seconds,
//               troupe:kv_transfer_seconds (a confirmed hand-off, export to confirmation)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <span>
#include <string_view>

#include "net/metrics/registry.h"

namespace troupe::net::metrics {

// What the scheduler reports after planning one step.
struct StepStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_cache_usage = 0.0;  // used blocks / all blocks
  int64_t num_admitted = 0;     // requests admitted this step
  int64_t num_preemptions = 0;  // requests preempted this step
  int64_t prefix_queries = 0;   // prompt tokens looked up in the prefix cache this step
  int64_t prefix_hits = 0;      // of which were cached
  double step_seconds = 0.0;    // time the scheduler spent planning the step
};

class ServingMetrics {
 public:
  ServingMetrics(Registry& registry, const std::string& model_name);

  void record_step(const StepStats& s);
  // A request's first output token: its prompt counts as processed.
  void record_first_token(int64_t prompt_tokens, double ttft_seconds);
  // Further output tokens of a request; `seconds` since its previous output.
  void record_tokens(int64_t num_tokens, double seconds);
  // finish_reason: "stop", "length", "abort" or "error" (runtime::finish_reason).
  void record_finished(std::string_view finish_reason, double e2e_seconds, double queue_seconds);
  // A request that ended with FinishedError; cause: runtime::to_string(ErrorCause).
  Counter& request_errors(std::string_view cause);
  // A connection closed for not reading its output; api "http" or "tcp", reason
  // net::kOutputLimit or net::kWriteTimeout (net/common/output_queue.h).
  Counter& slow_client_disconnects(std::string_view api, std::string_view reason);
  // Speculative decoding since the last call: verified drafts, their tokens, the accepted
  // ones, and accepted_per_pos[i] the accepted tokens at draft position i.
  void record_spec_decode(int64_t num_drafts, int64_t num_draft_tokens, int64_t num_accepted,
                          std::span<const int64_t> accepted_per_pos);

  // One rank's state gauges in an instance of R > 1 ranks: the four state families with
  // a `rank` label beside the instance total (the child without one).
  struct RankGauges {
    Gauge& running;
    Gauge& waiting;
    Gauge& kv_usage;
    Gauge& used_blocks;
  };
  RankGauges rank_gauges(int rank);
  // A cluster router's per-instance series (label instance): the same gauges, and the
  // prefix cache's queried and hit tokens (their ratio: the instance's hit rate).
  struct InstanceSeries {
    RankGauges gauges;
    Counter& prefix_cache_queries;
    Counter& prefix_cache_hits;
  };
  InstanceSeries instance_series(const std::string& instance);

  // Live EPLB's series of one model, "target" or "draft" (the DSpark draft's MoE, balanced
  // apart); registered on first use: an instance without EPLB has none.
  struct EplbSeries {
    Counter& rebalances;
    Gauge& balance_before;
    Gauge& balance_after;
  };
  EplbSeries eplb(const std::string& model);

  Gauge& num_requests_running;
  Gauge& num_requests_waiting;
  Gauge& kv_cache_usage_perc;
  Gauge& kv_cache_used_blocks;
  Counter& prefix_cache_queries;
  Counter& prefix_cache_hits;
  std::array<Counter*, 3> prefix_cache_hits_by_tier;  // primary, host, disk
  std::array<Gauge*, 3> kv_cache_tier_bytes;
  Counter& prefix_cache_snapshot_hits;
  Counter& prefix_cache_replay_hits;
  Counter& prefix_cache_replay_tokens;
  Gauge& kv_saved_prefixes;
  Gauge& kv_pinned_bytes;
  Counter& kv_restore_hits;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Counter& num_preemptions;
  Counter& rank_busy_seconds;
  Counter& failed_steps;
  Counter& engine_restarts;
  Counter& spec_decode_num_drafts;
  Counter& spec_decode_num_draft_tokens;
  Counter& spec_decode_num_accepted_tokens;
  Counter& kv_transfer_bytes;
  std::array<Counter*, 5> kv_transfer_failures;  // by runtime::KvTransferFailure
  Counter& kv_transfer_fallbacks;
  Counter& kv_transfers_rma;       // troupe:kv_transfers_total{by="rma"}
  Counter& kv_transfers_message;   // troupe:kv_transfers_total{by="message"}
  Counter& kv_transfer_descriptors;
  Counter& kv_transfer_leases_expired;
  std::array<Counter*, 3> kv_handoff_phase_seconds;  // by runtime::kKvHandoffPhaseNames
  Counter& kv_handoff_phased;
  Histogram& kv_transfer_seconds;  // runtime::kKvTransferSecondsBounds
  Histogram& time_to_first_token;
  Histogram& inter_token_latency;
  Histogram& e2e_request_latency;
  Histogram& request_queue_time;
  Histogram& num_requests_admitted_per_step;
  Histogram& scheduler_step_time;

 private:
  Counter& request_success(std::string_view finish_reason);

  Registry& registry_;
  std::string model_name_;
};

}  // namespace troupe::net::metrics
