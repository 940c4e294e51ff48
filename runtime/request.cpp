#include "runtime/request.h"

#include <cmath>

#include "kernels/check.h"

namespace troupe::runtime {

bool is_finished(RequestStatus s) {
  return s == RequestStatus::FinishedStopped || s == RequestStatus::FinishedLength ||
         s == RequestStatus::FinishedAborted || s == RequestStatus::FinishedError ||
         s == RequestStatus::HandedOff;
}

std::string_view to_string(RequestStatus s) {
  switch (s) {
    case RequestStatus::Waiting:
      return "waiting";
    case RequestStatus::Running:
      return "running";
    case RequestStatus::Preempted:
      return "preempted";
    case RequestStatus::FinishedStopped:
      return "finished_stopped";
    case RequestStatus::FinishedLength:
      return "finished_length";
    case RequestStatus::FinishedAborted:
      return "finished_aborted";
    case RequestStatus::FinishedError:
      return "finished_error";
    case RequestStatus::HandedOff:
      return "handed_off";
  }
  return "?";
}

std::string_view to_string(ErrorCause c) {
  switch (c) {
    case ErrorCause::None:
      return "none";
    case ErrorCause::BadRequest:
      return "bad_request";
    case ErrorCause::NoFit:
      return "no_fit";
    case ErrorCause::StepFailed:
      return "step_failed";
    case ErrorCause::EngineDied:
      return "engine_died";
    case ErrorCause::Timeout:
      return "timeout";
    case ErrorCause::Shutdown:
      return "shutdown";
    case ErrorCause::NotFound:
      return "not_found";
    case ErrorCause::NoRoom:
      return "no_room";
  }
  return "?";
}

std::string_view finish_reason(RequestStatus s) {
  switch (s) {
    case RequestStatus::FinishedStopped:
      return "stop";
    case RequestStatus::FinishedLength:
      return "length";
    case RequestStatus::FinishedAborted:
      return "abort";
    case RequestStatus::FinishedError:
      return "error";
    default:
      return "";
  }
}

void RequestParams::validate() const {
  const auto& s = sampling;
  TROUPE_CHECK(std::isfinite(s.temperature) && s.temperature >= 0.0f,
               "temperature must be finite and >= 0, got ", s.temperature);
  TROUPE_CHECK(s.top_k >= 0, "top_k must be >= 0, got ", s.top_k);
  TROUPE_CHECK(s.top_p > 0.0f && s.top_p <= 1.0f, "top_p must be in (0, 1], got ", s.top_p);
  TROUPE_CHECK(s.min_p >= 0.0f && s.min_p <= 1.0f, "min_p must be in [0, 1], got ", s.min_p);
  TROUPE_CHECK(max_tokens > 0, "max_tokens must be > 0, got ", max_tokens);
  TROUPE_CHECK(kv_hand_off_after >= 0, "kv_hand_off_after must be >= 0, got ", kv_hand_off_after);
  TROUPE_CHECK(num_logprobs >= -1, "num_logprobs must be >= -1 (-1: none), got ", num_logprobs);
  for (const std::string& stop : stop)
    TROUPE_CHECK(!stop.empty(), "stop strings must not be empty");
}

Request::Request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                 uint64_t arrival)
    : id(id),
      arrival(arrival),
      params(std::move(params)),
      tokens(prompt.begin(), prompt.end()),
      num_prompt_tokens(static_cast<int64_t>(prompt.size())) {}

}  // namespace troupe::runtime
