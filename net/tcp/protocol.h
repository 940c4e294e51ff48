// The TCP API's messages (docs/serve.md, "TCP API"), as pure logic: a decoded client
// frame -> a command, and the server's frames. No sockets, no engine.
//
// Client -> server:
//   {"type": "submit", "id": ID, "prompt": "text" | "tokens": [ids], "max_tokens": N,
//    "temperature", "top_p", "top_k", "min_p", "seed", "stop": [..], "ignore_eos": bool,
//    "logprobs": k (0..20: the logprob of each token and its k most likely alternatives),
//    "api_key": "..." (only when the server has one)}
//   {"type": "abort", "id": ID}
// Server -> client:
//   {"type": "tokens", "id": ID, "tokens": [ids], "text": "delta"}   per engine step
//     with "logprobs": [{"logprob": x, "top": [[id, x], ...]}] (one per token) if asked for
//   {"type": "done", "id": ID, "finish_reason": "stop|length|abort|error",
//    "usage": {"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"}}
//   {"type": "error", "id": ID | nil, "message": "..."}
// ID is the client's: an integer or a string, echoed back as given.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "net/openai/request_parse.h"
#include "runtime/scheduler/step_plan.h"

namespace troupe::net::tcp {

using nlohmann::json;

struct SubmitCommand {
  json id;
  openai::GenerationRequest request;  // checked as a /v1/completions body would be
};
struct AbortCommand {
  json id;
};
// A frame the server answers with an error frame only.
struct CommandError {
  json id;  // null when the frame had no usable id
  std::string message;
};
using Command = std::variant<SubmitCommand, AbortCommand, CommandError>;

// Every string of a frame (keys too) must be valid UTF-8: the first that is not is a
// CommandError naming its field. `api_key` non-empty: submits must carry it. The sampling fields get the same checks and
// defaults as /v1/completions (temperature 1, max_tokens 16, ...).
Command parse_command(const json& frame, const openai::ServingInfo& info,
                      const model::TextTokenizer& tok, std::string_view api_key);

// The frame's "id" when it is one that may be echoed (an integer or a valid UTF-8
// string); null otherwise. For error frames sent before the frame is parsed.
json usable_id(const json& frame);

// The key of an id in a connection's table of requests in flight; never throws on a
// string id's bytes.
std::string id_key(const json& id);

json tokens_message(const json& id, const runtime::RequestOutput& out);
json done_message(const json& id, const runtime::RequestOutput& last, int64_t prompt_tokens,
                  int64_t completion_tokens);
json error_message(const json& id, std::string_view message);

}  // namespace troupe::net::tcp
