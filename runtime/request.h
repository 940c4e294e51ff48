// One generation request as the scheduler sees it: its tokens (prompt then output, in
// one int32 buffer), how many of them have KV computed, its status and why it stopped.
//
// Lifecycle (vLLM v1 style: no prefill/decode phase, num_computed_tokens catches up
// with num_tokens):
//
//   Waiting --admit--> Running --stop / length / abort / error--> Finished*
//      ^                  |
//      +----preempt-------+   (blocks freed, num_computed_tokens = 0: recompute)
//
// A Preempted request waits again (status Preempted until re-admitted), at its original
// arrival position in the waiting queue.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/sampling.h"
#include "runtime/stop_checker.h"

namespace troupe::runtime {

using RequestId = int64_t;
struct KvHandoff;

enum class RequestStatus : uint8_t {
  Waiting,
  Running,
  Preempted,        // waiting again after its blocks were taken back
  FinishedStopped,  // EOS, a stop token id or a stop string
  FinishedLength,   // max_tokens or max_model_len
  FinishedAborted,  // the client aborted it
  FinishedError,    // it failed: ErrorCause says why (Request::error has the text)
  // Done here, not finished: its KV is parked for a hand-off (RequestParams::
  // kv_hand_off_after, Scheduler::hand_off) and the request goes on in another engine
  // (docs/pd.md). No finish_reason: its stream continues there.
  HandedOff,
};

// Why a request finished with FinishedError. The API maps it to a status, metrics count
// errors by it (troupe:request_errors_total{cause}), logs name it.
enum class ErrorCause : uint8_t {
  None,
  BadRequest,  // refused when added (bad parameters, prompt too long, duplicate id)
  NoFit,       // can never fit in the KV cache
  StepFailed,  // the step running it threw (the rank carried on)
  EngineDied,  // its scheduler or rank actor died; the instance was restarted
  Timeout,     // ran past request-timeout
  Shutdown,    // the server stopped before it finished (its grace period ran out)
  NotFound,    // kv_restore / kv_delete named no saved prefix
  NoRoom,      // kv_save: the pinned KV budget is full or off
};
std::string_view to_string(ErrorCause c);  // the metric label: "step_failed", ...

bool is_finished(RequestStatus s);
std::string_view to_string(RequestStatus s);

// The OpenAI / vLLM finish_reason of a finished request: "stop", "length", "abort",
// "error"; empty while it runs.
std::string_view finish_reason(RequestStatus s);

// Per-request parameters, checked by validate() when the request is added.
struct RequestParams {
  kernels::SamplingParams sampling;     // seed: sampling.seed
  int64_t max_tokens = 16;              // > 0 output tokens at most
  std::vector<int32_t> stop_token_ids;  // any of these ends the request (kept in output)
  std::vector<std::string> stop;        // stop strings, matched on the detokenized text
  bool ignore_eos = false;              // keep going past EOS
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;  // special tokens give no text
  int32_t priority = 0;             // lower runs first under the priority policy (as vLLM)
  int32_t num_logprobs = -1;        // top alternatives per output token (>= 0); -1: no logprobs
  // KV save by name (docs/kv-cache.md "Saved prefixes"): kv_save pins the prompt's blocks
  // under this name when the request finishes (POST /v1/kv/save); kv_restore puts the
  // tokens saved under it before the prompt (404 when unknown); kv_delete unpins it and
  // runs nothing (DELETE /v1/kv/ID).
  std::string kv_save;
  std::string kv_restore;
  std::string kv_delete;
  // P/D disaggregation (docs/pd.md): once the request has this many output tokens (and
  // has not finished), it stops with status HandedOff and its KV stays parked for
  // Engine::export_request; 0: never. A prefill instance runs requests with 1.
  int64_t kv_hand_off_after = 0;

  void validate() const;  // throws troupe::Error naming the bad field

  bool operator==(const RequestParams&) const = default;
};

// Another member of a request group (n > 1 choices of one prompt): its own id, seed and
// limits; the leader's prompt. Only the leader is prefilled; each sibling is forked from
// it when its prompt is done (docs/scheduler.md "n > 1").
struct Sibling {
  RequestId id = 0;
  RequestParams params;

  bool operator==(const Sibling&) const = default;
};

struct Request {
  Request(RequestId id, std::span<const int32_t> prompt, RequestParams params, uint64_t arrival);

  RequestId id;
  uint64_t arrival;  // order of arrival; FCFS key and preemption order
  RequestParams params;
  std::vector<int32_t> tokens;  // [num_tokens] prompt then output
  int64_t num_prompt_tokens;
  int64_t num_computed_tokens = 0;  // tokens [0, this) have KV in the cache (or will, once
                                    // the plans in flight ran)
  // Tokens sampled by plans still in flight (asynchronous scheduling): they sit at
  // positions [num_tokens, num_tokens + this) and a next plan may already decode them; the
  // executor fills in their ids. At most one with one plan in flight.
  int64_t num_placeholders = 0;
  // Of those, from speculative chunks: where the next chunk starts is unknown until they ran.
  int64_t num_speculative_in_flight = 0;
  int64_t num_cached_tokens = 0;    // prefix-cache hit at the last admission
  // Window snapshots: the snapshot slot the next chunk restores its rings from (a hit on
  // one at admission), and the chunks planned with a snapshot copy that update() has not
  // seen yet (while any is in flight the slot may still change, so it is not cached).
  int32_t restore_slot = -1;
  int64_t snapshot_writes_in_flight = 0;
  RequestStatus status = RequestStatus::Waiting;
  int64_t num_preemptions = 0;
  StopReason stop_reason;  // which stop token / string matched (vLLM's stop_reason)
  std::string error;       // why, for FinishedError
  ErrorCause error_cause = ErrorCause::None;
  Detokenizer detok;       // output text so far, and how much of it was streamed
  // n > 1 groups, until the leader's prompt is done: the leader lists its siblings still
  // to fork; each of those names its leader (and is in no queue meanwhile).
  std::vector<RequestId> siblings;
  RequestId leader = -1;
  // Added with its KV (Scheduler::add_imported): loaded when admitted, then dropped (a
  // preemption afterwards recomputes, as for any request).
  std::shared_ptr<const KvHandoff> kv_load;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return {tokens.data(), size_t(num_prompt_tokens)}; }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens).subspan(size_t(num_prompt_tokens));
  }
  bool finished() const { return is_finished(status); }
  // Tokens still to be computed; more than one means the request is (re)filling its
  // prompt, i.e. its next chunk is a prefill chunk.
  int64_t num_uncomputed() const { return num_tokens_planned() - num_computed_tokens; }
  // Tokens including those sampled by plans in flight.
  int64_t num_tokens_planned() const { return num_tokens() + num_placeholders; }
  // Output tokens including those sampled by plans in flight: what the next sample's
  // index (Philox counter) and the max_tokens limit count.
  int64_t num_output_tokens_planned() const { return num_output_tokens() + num_placeholders; }
};

}  // namespace troupe::runtime
