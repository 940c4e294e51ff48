#include "net/metrics/serving_metrics.h"

#include <string>
#include <vector>

#include "runtime/step/engine_figures.h"

namespace troupe::net::metrics {

namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py), so histograms compare bucket for bucket.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// troupe's own: admissions per step in powers of two; planning time from 10 us to 1 s.
const std::vector<double> kAdmittedBuckets = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const std::vector<double> kStepTimeBuckets = {1e-5,  2.5e-5, 5e-5,  1e-4, 2.5e-4, 5e-4,
                                              0.001, 0.0025, 0.005, 0.01, 0.025,  0.05,
                                              0.1,   0.25,   0.5,   1.0};

// The state gauges, also per rank (rank_gauges): one help text per family.
const char* const kRunningHelp = "Number of requests in model execution batches.";
const char* const kWaitingHelp = "Number of requests waiting to be processed.";
const char* const kKvUsageHelp = "KV-cache usage. 1 means 100 percent usage.";
const char* const kUsedBlocksHelp = "KV-cache blocks held by requests (cached free blocks excluded).";

const char* const kFinishReasons[] = {"stop", "length", "abort", "error"};
const char* const kErrorCauses[] = {"bad_request", "no_fit", "step_failed", "engine_died",
                                    "timeout", "shutdown", "not_found", "no_room"};

}  // namespace

namespace {

Counter& tier_counter(Registry& r, const std::string& name, const std::string& help,
                      const std::string& model_name, const std::string& tier) {
  return r.counter(name, help, {{"model_name", model_name}, {"tier", tier}});
}

Gauge& tier_gauge(Registry& r, const std::string& model_name, const std::string& tier) {
  return r.gauge("troupe:kv_cache_tier_bytes",
                 "Bytes of KV blocks each tier holds (primary pool, host memory, disk files).",
                 {{"model_name", model_name}, {"tier", tier}});
}

Counter& transfer_failures(Registry& r, const std::string& model_name, size_t cause) {
  return r.counter("troupe:kv_transfer_failures", "KV hand-offs sent that failed, by cause.",
                   {{"cause", runtime::kKvTransferFailureNames[cause]}, {"model_name", model_name}});
}

Counter& transfers_by(Registry& r, const std::string& model_name, const char* by) {
  return r.counter("troupe:kv_transfers",
                   "KV hand-offs the transfer agent moved: the region by one RMA put, or all in a message.",
                   {{"by", by}, {"model_name", model_name}});
}

Counter& handoff_phase(Registry& r, const std::string& model_name, size_t phase) {
  return r.counter("troupe:kv_handoff_phase_seconds",
                   "A cluster router's P/D moves by phase: time to first token on the prefill side, "
                   "the move until its answer, the decode side's first tokens; seconds summed.",
                   {{"model_name", model_name}, {"phase", runtime::kKvHandoffPhaseNames[phase]}});
}

}  // namespace

ServingMetrics::ServingMetrics(Registry& r, const std::string& model_name)
    : num_requests_running(
          r.gauge("troupe:num_requests_running", kRunningHelp, {{"model_name", model_name}})),
      num_requests_waiting(
          r.gauge("troupe:num_requests_waiting", kWaitingHelp, {{"model_name", model_name}})),
      kv_cache_usage_perc(
          r.gauge("troupe:kv_cache_usage_perc", kKvUsageHelp, {{"model_name", model_name}})),
      kv_cache_used_blocks(
          r.gauge("troupe:kv_cache_used_blocks", kUsedBlocksHelp, {{"model_name", model_name}})),
      prefix_cache_queries(r.counter("troupe:prefix_cache_queries",
                                     "Prefix cache queries, in terms of number of queried tokens.",
                                     {{"model_name", model_name}})),
      prefix_cache_hits(r.counter("troupe:prefix_cache_hits",
                                  "Prefix cache hits, in terms of number of cached tokens.",
                                  {{"model_name", model_name}})),
      prefix_cache_hits_by_tier{
          &tier_counter(r, "troupe:prefix_cache_hits",
                        "Prefix cache hits, in terms of number of cached tokens.", model_name,
                        "primary"),
          &tier_counter(r, "troupe:prefix_cache_hits",
                        "Prefix cache hits, in terms of number of cached tokens.", model_name,
                        "host"),
          &tier_counter(r, "troupe:prefix_cache_hits",
                        "Prefix cache hits, in terms of number of cached tokens.", model_name,
                        "disk")},
      kv_cache_tier_bytes{&tier_gauge(r, model_name, "primary"), &tier_gauge(r, model_name, "host"),
                          &tier_gauge(r, model_name, "disk")},
      prefix_cache_snapshot_hits(
          r.counter("troupe:prefix_cache_snapshot_hits",
                    "Prefix cache hits whose SWA windows a window snapshot restored (no replay).",
                    {{"model_name", model_name}})),
      prefix_cache_replay_hits(
          r.counter("troupe:prefix_cache_replay_hits",
                    "Prefix cache hits whose SWA windows were rebuilt by a replay.",
                    {{"model_name", model_name}})),
      prefix_cache_replay_tokens(
          r.counter("troupe:prefix_cache_replay_tokens",
                    "Tokens recomputed to rebuild SWA windows on prefix cache hits.",
                    {{"model_name", model_name}})),
      kv_saved_prefixes(r.gauge("troupe:kv_saved_prefixes",
                                "KV prefixes saved by name (POST /v1/kv/save) and not deleted.",
                                {{"model_name", model_name}})),
      kv_pinned_bytes(r.gauge("troupe:kv_pinned_bytes",
                              "Bytes of KV blocks and window snapshots the saved prefixes pin.",
                              {{"model_name", model_name}})),
      kv_restore_hits(r.counter("troupe:kv_restore_hits",
                                "Requests whose kv_restore named a saved KV prefix.",
                                {{"model_name", model_name}})),
      prompt_tokens(r.counter("troupe:prompt_tokens", "Number of prefill tokens processed.",
                              {{"model_name", model_name}})),
      generation_tokens(r.counter("troupe:generation_tokens",
                                  "Number of generation tokens processed.",
                                  {{"model_name", model_name}})),
      num_preemptions(r.counter("troupe:num_preemptions",
                                "Cumulative number of preemptions from the engine.",
                                {{"model_name", model_name}})),
      rank_busy_seconds(r.counter("troupe:rank_busy_seconds",
                                  "Seconds the model rank spent running steps (rate: utilization).",
                                  {{"model_name", model_name}})),
      failed_steps(r.counter("troupe:failed_steps",
                             "Steps the model rank threw on (their requests ended with an error).",
                             {{"model_name", model_name}})),
      engine_restarts(r.counter("troupe:engine_restarts",
                                "Times the scheduler and rank were restarted after one died.",
                                {{"model_name", model_name}})),
      spec_decode_num_drafts(r.counter("troupe:spec_decode_num_drafts",
                                       "Number of spec decoding drafts.",
                                       {{"model_name", model_name}})),
      spec_decode_num_draft_tokens(r.counter("troupe:spec_decode_num_draft_tokens",
                                             "Number of draft tokens.",
                                             {{"model_name", model_name}})),
      spec_decode_num_accepted_tokens(r.counter("troupe:spec_decode_num_accepted_tokens",
                                                "Number of accepted tokens.",
                                                {{"model_name", model_name}})),
      kv_transfer_bytes(r.counter("troupe:kv_transfer_bytes",
                                  "Bytes of KV hand-offs sent and confirmed by the receiver.",
                                  {{"model_name", model_name}})),
      kv_transfer_failures{&transfer_failures(r, model_name, 0), &transfer_failures(r, model_name, 1),
                           &transfer_failures(r, model_name, 2), &transfer_failures(r, model_name, 3),
                           &transfer_failures(r, model_name, 4)},
      kv_transfer_fallbacks(r.counter("troupe:kv_transfer_fallbacks",
                                      "KV hand-offs received and recomputed instead of loaded.",
                                      {{"model_name", model_name}})),
      kv_transfers_rma(transfers_by(r, model_name, "rma")),
      kv_transfers_message(transfers_by(r, model_name, "message")),
      kv_transfer_descriptors(r.counter("troupe:kv_transfer_descriptors",
                                        "RMA puts the transfer agent issued for KV hand-offs (one a region).",
                                        {{"model_name", model_name}})),
      kv_transfer_leases_expired(r.counter(
          "troupe:kv_transfer_leases_expired",
          "Staging regions reserved for a KV hand-off whose sender never committed.",
          {{"model_name", model_name}})),
      kv_handoff_phase_seconds{&handoff_phase(r, model_name, 0), &handoff_phase(r, model_name, 1),
                               &handoff_phase(r, model_name, 2)},
      kv_handoff_phased(r.counter("troupe:kv_handoff_phased",
                                  "A cluster router's P/D moves counted in kv_handoff_phase_seconds.",
                                  {{"model_name", model_name}})),
      kv_transfer_seconds(r.histogram(
          "troupe:kv_transfer_seconds",
          "Histogram of KV hand-off time, export to the receiver's confirmation, in seconds.",
          std::vector<double>(runtime::kKvTransferSecondsBounds.begin(),
                              runtime::kKvTransferSecondsBounds.end()),
          {{"model_name", model_name}})),
      time_to_first_token(r.histogram("troupe:time_to_first_token_seconds",
                                      "Histogram of time to first token in seconds.", kTtftBuckets,
                                      {{"model_name", model_name}})),
      inter_token_latency(r.histogram("troupe:inter_token_latency_seconds",
                                      "Histogram of inter-token latency in seconds.", kItlBuckets,
                                      {{"model_name", model_name}})),
      e2e_request_latency(r.histogram("troupe:e2e_request_latency_seconds",
                                      "Histogram of e2e request latency in seconds.",
                                      kRequestBuckets, {{"model_name", model_name}})),
      request_queue_time(r.histogram("troupe:request_queue_time_seconds",
                                     "Histogram of time spent in WAITING phase for request.",
                                     kRequestBuckets, {{"model_name", model_name}})),
      num_requests_admitted_per_step(r.histogram("troupe:num_requests_admitted_per_step",
                                                 "Histogram of requests admitted per step.",
                                                 kAdmittedBuckets, {{"model_name", model_name}})),
      scheduler_step_time(r.histogram("troupe:scheduler_step_time_seconds",
                                      "Histogram of time the scheduler spends planning a step.",
                                      kStepTimeBuckets, {{"model_name", model_name}})),
      registry_(r),
      model_name_(model_name) {
  for (const char* reason : kFinishReasons) request_success(reason);  // all series from 0
  for (const char* cause : kErrorCauses) request_errors(cause);
  for (const char* api : {"http", "tcp"})
    for (const char* reason : {"output_limit", "write_timeout"}) slow_client_disconnects(api, reason);
}

Counter& ServingMetrics::slow_client_disconnects(std::string_view api, std::string_view reason) {
  return registry_.counter(
      "troupe:slow_client_disconnects",
      "Connections closed because the client did not read its output, their requests aborted.",
      {{"api", std::string(api)}, {"reason", std::string(reason)}, {"model_name", model_name_}});
}

Counter& ServingMetrics::request_errors(std::string_view cause) {
  return registry_.counter("troupe:request_errors", "Requests that ended with an error, by cause.",
                           {{"cause", std::string(cause)}, {"model_name", model_name_}});
}

Counter& ServingMetrics::request_success(std::string_view finish_reason) {
  return registry_.counter(
      "troupe:request_success", "Count of successfully processed requests.",
      {{"finished_reason", std::string(finish_reason)}, {"model_name", model_name_}});
}

void ServingMetrics::record_spec_decode(int64_t num_drafts, int64_t num_draft_tokens,
                                        int64_t num_accepted,
                                        std::span<const int64_t> accepted_per_pos) {
  spec_decode_num_drafts.inc(double(num_drafts));
  spec_decode_num_draft_tokens.inc(double(num_draft_tokens));
  spec_decode_num_accepted_tokens.inc(double(num_accepted));
  for (size_t i = 0; i < accepted_per_pos.size(); ++i)
    registry_
        .counter("troupe:spec_decode_num_accepted_tokens_per_pos",
                 "Accepted tokens per draft position.",
                 {{"position", std::to_string(i)}, {"model_name", model_name_}})
        .inc(double(accepted_per_pos[i]));
}

void ServingMetrics::record_step(const StepStats& s) {
  num_requests_running.set(double(s.num_running));
  num_requests_waiting.set(double(s.num_waiting));
  kv_cache_usage_perc.set(s.kv_cache_usage);
  num_preemptions.inc(double(s.num_preemptions));
  prefix_cache_queries.inc(double(s.prefix_queries));
  prefix_cache_hits.inc(double(s.prefix_hits));
  num_requests_admitted_per_step.observe(double(s.num_admitted));
  scheduler_step_time.observe(s.step_seconds);
}

void ServingMetrics::record_first_token(int64_t num_prompt_tokens, double ttft_seconds) {
  prompt_tokens.inc(double(num_prompt_tokens));
  generation_tokens.inc(1.0);
  time_to_first_token.observe(ttft_seconds);
}

void ServingMetrics::record_tokens(int64_t num_tokens, double seconds) {
  generation_tokens.inc(double(num_tokens));
  inter_token_latency.observe(seconds);
}

void ServingMetrics::record_finished(std::string_view finish_reason, double e2e_seconds,
                                     double queue_seconds) {
  request_success(finish_reason).inc();
  e2e_request_latency.observe(e2e_seconds);
  request_queue_time.observe(queue_seconds);
}

ServingMetrics::RankGauges ServingMetrics::rank_gauges(int rank) {
  const Labels labels{{"model_name", model_name_}, {"rank", std::to_string(rank)}};
  return {registry_.gauge("troupe:num_requests_running", kRunningHelp, labels),
          registry_.gauge("troupe:num_requests_waiting", kWaitingHelp, labels),
          registry_.gauge("troupe:kv_cache_usage_perc", kKvUsageHelp, labels),
          registry_.gauge("troupe:kv_cache_used_blocks", kUsedBlocksHelp, labels)};
}

ServingMetrics::InstanceSeries ServingMetrics::instance_series(const std::string& instance) {
  const Labels labels{{"model_name", model_name_}, {"instance", instance}};
  return {{registry_.gauge("troupe:num_requests_running", kRunningHelp, labels),
           registry_.gauge("troupe:num_requests_waiting", kWaitingHelp, labels),
           registry_.gauge("troupe:kv_cache_usage_perc", kKvUsageHelp, labels),
           registry_.gauge("troupe:kv_cache_used_blocks", kUsedBlocksHelp, labels)},
          registry_.counter("troupe:prefix_cache_queries",
                            "Prefix cache queries, in terms of number of queried tokens.", labels),
          registry_.counter("troupe:prefix_cache_hits",
                            "Prefix cache hits, in terms of number of cached tokens.", labels)};
}

ServingMetrics::EplbSeries ServingMetrics::eplb(const std::string& model) {
  const char* const help =
      "Mean per-layer expert balance (mean rank load / max rank load) of the EPLB window on "
      "the placement before and after the last switch.";
  return {registry_.counter("troupe:eplb_rebalances",
                            "Expert placements the ranks switched to (live EPLB).",
                            {{"model_name", model_name_}, {"model", model}}),
          registry_.gauge("troupe:eplb_balance", help,
                          {{"model_name", model_name_}, {"model", model}, {"when", "before"}}),
          registry_.gauge("troupe:eplb_balance", help,
                          {{"model_name", model_name_}, {"model", model}, {"when", "after"}})};
}

}  // namespace troupe::net::metrics
