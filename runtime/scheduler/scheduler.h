// The scheduler policy: which requests run how many tokens each step (continuous
// batching, chunked prefill, one token budget - vLLM v1 style), and the bookkeeping after
// the step ran. Pure logic over a real KvCacheManager: no model calls, no actors.
//
//   Scheduler s(config, kv, eos_id, &tokenizer);
//   s.add_request(id, prompt, params);
//   while (s.has_unfinished()) {
//     StepPlan plan = s.schedule();            // what to run
//     auto sampled = executor.run(plan);        // [plan.chunks.size()] SampledChunk
//     for (auto& out : s.update(plan, sampled)) stream(out);
//   }
//
// Order within a step (documented in docs/scheduler.md):
//   1. decodes of running requests (one token each, admission order)
//   2. continuing prefill chunks of running requests (admission order)
//   3. admissions from the waiting queue (FCFS, or priority then FCFS) until a limit
// Running out of KV blocks preempts the newest running request (last by the waiting
// order); a request that cannot fit even alone finishes with FinishedError.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/request.h"
#include "runtime/scheduler/chunk_rules.h"
#include "runtime/scheduler/scheduler_config.h"
#include "runtime/scheduler/step_plan.h"
#include "runtime/stop_checker.h"

namespace troupe::runtime {

class Scheduler {
 public:
  // tokenizer: for stop strings and output text; may be nullptr (then stop strings are
  // rejected and outputs carry no text). kv must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int32_t eos_token_id,
            const model::TextTokenizer* tokenizer = nullptr);

  // Throws troupe::Error on bad input (duplicate id, empty or too long prompt, bad params).
  // siblings: more requests of the same prompt (n > 1), each with its own id and params.
  // Only `id` is queued and prefilled; when its prompt is done each sibling is forked from
  // it (shared blocks, copied windows, no prefill) or, if the KV cache has no room then,
  // queued as a plain request. Each member is then a request of its own (outputs, abort).
  void add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                   std::vector<Sibling> siblings = {});
  // Ends the request now and frees its blocks; reported by the next update(). Unknown or
  // finished ids are ignored (the client may race the finish).
  void abort(RequestId id);

  // KV hand-off (P/D disaggregation, decode drain; docs/pd.md). A request that stops
  // with status HandedOff (RequestParams::kv_hand_off_after, or hand_off()) keeps its
  // blocks and ring slot here, parked, until release_parked(); parked() says what the
  // hand-off carries besides the KV bytes.
  struct ParkedRequest {
    std::vector<int32_t> tokens;  // prompt then output; the last one not computed
    RequestParams params;         // as it ran here (the receiver clears kv_hand_off_after)
    int64_t num_prompt_tokens = 0;
    int64_t num_cached_tokens = 0;
    std::string text;  // the detokenizer's state
    int64_t text_tokens = 0;
    uint64_t streamed_text_bytes = 0;
    bool keep_snapshot = true;
  };
  const ParkedRequest* parked(RequestId id) const;  // nullptr: not parked
  void release_parked(RequestId id);                // frees its KV; unknown ids: no-op
  int64_t num_parked() const { return static_cast<int64_t>(parked_.size()); }
  // A request continued from another engine's hand-off: it waits as any request and,
  // when admitted (at most max_kv_loads_per_step a step), its plan's KvLoad copies h's
  // bytes in and its first chunk decodes h's last token. A hand-off without KV
  // (carries_kv) is admitted as a preempted request is: its tokens are recomputed. Throws
  // troupe::Error on bad input (as add_request; h's bytes are checked by the caller:
  // import_handoff).
  void add_imported(RequestId id, std::shared_ptr<const KvHandoff> h, RequestParams params);
  // Drain: hands request id off as soon as its KV is consistent. Now: it is parked
  // already and may be exported at once (its output, with no tokens, comes with the next
  // update()); AfterStep: after the samples of the plans
  // in flight (or its prompt's first sample); NotHeld: it holds no KV (waiting or
  // preempted: move its tokens instead); Unknown: no such running request.
  enum class HandOff : uint8_t { Now, AfterStep, NotHeld, Unknown };
  HandOff hand_off(RequestId id);
  // Ends the request now with FinishedError (a failed step, a timeout), frees its blocks;
  // reported by the next update() or take_finished(). Unknown or finished ids are ignored.
  void fail(RequestId id, std::string why, ErrorCause cause);
  // The outputs of requests finished outside update() (abort, fail) not reported yet, so
  // a caller can report them while plans are still in flight (their later chunks are
  // ignored by update()).
  std::vector<RequestOutput> take_finished();

  StepPlan schedule();
  // The same into `plan` (any plan this scheduler made before, or an empty one): its
  // chunks' vectors are kept for later plans, so planning a steady batch allocates nothing.
  void schedule(StepPlan& plan);
  // sampled[i]: the tokens sampled for plan.chunks[i] (one, or empty if !chunks[i].sample)
  // and their logprobs if asked for. Appends them, advances the KV cache's committed
  // blocks, checks stops, frees finished requests; outputs carry the logprobs of their
  // new tokens. Chunks of requests aborted or preempted since the plan are ignored.
  std::vector<RequestOutput> update(const StepPlan& plan, std::span<const SampledChunk> sampled);
  // The same, appending to `outputs`; their vectors come from outputs given back with
  // recycle() when there are any.
  void update(const StepPlan& plan, std::span<const SampledChunk> sampled,
              std::vector<RequestOutput>& outputs);
  // Takes the outputs (emptying the vector) to reuse their buffers in later updates.
  void recycle(std::vector<RequestOutput>& outputs);

  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  const Request* find(RequestId id) const;  // nullptr once finished and reported
  std::vector<RequestId> running_ids() const;
  std::vector<RequestId> waiting_ids() const;  // in admission order, then unforked siblings
  const SchedulerConfig& config() const { return config_; }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  // Speculative decoding: the drafts a decode may verify from the next plan on, clamped to
  // [0, config.num_speculative_tokens] (the online cost table's choice; 0: plain decodes,
  // which may then be planned ahead again under async scheduling).
  void set_draft_limit(int64_t k);
  int64_t draft_limit() const { return draft_limit_; }

 private:
  using QueueKey = std::pair<int64_t, uint64_t>;  // (priority or 0, arrival)
  QueueKey queue_key(const Request& r) const;

  void schedule_running(StepPlan& plan, StepBudget& budget, bool decodes);
  bool may_decode_ahead(const Request& r) const;
  bool speculates(const Request& r) const;
  int64_t num_draft_tokens(const Request& r, const StepBudget& budget) const;
  void schedule_admissions(StepPlan& plan, StepBudget& budget);
  bool try_admit(Request& r, StepPlan& plan, StepBudget& budget);
  bool try_admit_loaded(Request& r, StepPlan& plan, StepBudget& budget);
  bool fails_to_fit(Request& r);
  bool waits_for_room(Request& r);
  void start_running(Request& r, int64_t num_computed, int64_t num_cached, int32_t restore_slot,
                     StepPlan& plan, StepBudget& budget);
  bool hands_off(const Request& r) const;  // reached its kv_hand_off_after
  void park(Request& r);
  bool reserve(Request& r, int64_t total_tokens, StepPlan& plan, StepBudget& budget);
  Request& preemption_victim();
  void preempt(Request& r, StepPlan& plan, StepBudget& budget);
  void add_chunk(Request& r, int64_t start, int64_t n, bool prefill, StepPlan& plan,
                 StepBudget& budget);
  void finalize(StepPlan& plan);
  void fork_siblings(Request& leader, StepPlan& plan);
  bool try_fork(Request& leader, Request& s, StepPlan& plan);
  void check_params(RequestId id, const RequestParams& params) const;
  void fail(Request& r, std::string why, ErrorCause cause = ErrorCause::NoFit);
  void finish_now(Request& r, RequestStatus status);
  RequestOutput make_output(Request& r, std::vector<int32_t> new_tokens);
  // Appends r's output with its fields set and new_tokens empty (a recycled one if any).
  RequestOutput& append_output(Request& r, std::vector<RequestOutput>& outputs);
  void fill_output(Request& r, RequestOutput& o);
  ScheduledChunk& new_chunk(StepPlan& plan);  // a recycled chunk (its buffers), reset
  void release(Request& r);

  SchedulerConfig config_;
  int64_t draft_limit_ = 0;
  KvCacheManager& kv_;
  StopLimits limits_;
  uint64_t next_arrival_ = 0;
  uint64_t step_ = 0;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::map<QueueKey, Request*> waiting_;  // begin() is admitted next
  std::vector<Request*> running_;         // admission order; holds KV
  std::vector<RequestOutput> pending_;    // finished outside update(), reported next
  std::unordered_map<RequestId, ParkedRequest> parked_;
  std::vector<RequestId> finished_since_plan_;
  // Kept for their capacity (built once, updated in place): the running order being
  // planned, chunks of earlier plans and outputs given back (recycle()).
  std::vector<Request*> order_;
  std::vector<ScheduledChunk> spare_chunks_;
  std::vector<RequestOutput> spare_outputs_;
  // Block-table room every chunk gets: the most blocks any admitted request can reach.
  size_t chunk_table_room_ = 0;
};

}  // namespace troupe::runtime
