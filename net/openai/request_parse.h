// POST /v1/completions and /v1/chat/completions bodies -> one GenerationRequest, or an
// ApiError (errors.h) saying what is wrong. Pure logic: no sockets, no engine.
//
// Fields read (anything else is ignored, as vLLM does):
//   model            optional; must equal the served name (404 model_not_found otherwise)
//   prompt|messages  prompt.h
//   max_tokens, max_completion_tokens (chat; wins over max_tokens)
//                    >= 1 and prompt + max_tokens <= max_model_len; default: 16 for
//                    completions (OpenAI's), the rest of the context for chat, both cut
//                    to the room the context leaves
//   temperature (default 1, as OpenAI), top_p, top_k (-1 or 0: off), min_p, seed,
//   stop (string or list), stop_token_ids, n, stream, stream_options.include_usage,
//   user, ignore_eos, include_stop_str_in_output, skip_special_tokens,
//   logprobs: completions an int in [0, max_logprobs]; chat a bool plus top_logprobs
//   return_token_ids (vLLM's extension, token_ids.h)
//   add_generation_prompt (chat, default true)
//   kv_restore       troupe's extension (kv_requests.h): the name of a saved KV prefix, whose
//                    tokens go before this prompt
#pragma once

#include "runtime/faults/fault_plan.h"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "net/openai/errors.h"
#include "runtime/request.h"

namespace troupe::model {
class TextTokenizer;
}

namespace troupe::net::openai {

enum class Endpoint { Completions, ChatCompletions };

// What the server serves; the limits a request is checked against.
struct ServingInfo {
  std::string model_name;            // the one served name ("model" in requests)
  int64_t max_model_len = 0;         // prompt + output tokens at most
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  int32_t max_n = 16;                // choices per request at most
  int32_t max_logprobs = 20;         // top alternatives per token at most
  const runtime::FaultPlan* faults = nullptr;  // injected faults (tokenize-fail); null: none
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                   // the served name, also when the body named none
  std::vector<int32_t> prompt_tokens;  // [num_prompt_tokens]
  std::string prompt_text;             // the encoded text; empty for a token-id prompt
  runtime::RequestParams params;       // sampling, max_tokens, stops, ignore_eos
  std::optional<uint64_t> seed;        // as given (negative seeds wrap); absent: the
                                       // server draws one and puts it in params
  int32_t n = 1;                       // independent choices sharing the prompt
  std::optional<int32_t> logprobs;     // top alternatives per token; nullopt: none (also
                                       // in params.num_logprobs, -1 for none)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool return_token_ids = false;  // token_ids.h
  std::string user;
};

using ParseResult = std::variant<GenerationRequest, ApiError>;

ParseResult parse_generation_request(Endpoint endpoint, std::string_view body,
                                     const ServingInfo& info, const model::TextTokenizer& tok);

// The same checks on a body already decoded (the TCP API's msgpack frames). No size
// check: the caller bounds its own input. Strings must be valid UTF-8 (the caller's
// check: JSON text guarantees it, msgpack does not); numbers may be NaN or +-Inf, which
// are refused naming the field.
ParseResult parse_generation_body(Endpoint endpoint, const nlohmann::json& body,
                                  const ServingInfo& info, const model::TextTokenizer& tok);

// The body as a JSON object; throws ApiException: 413 over the size limit, 400 for
// malformed JSON or a non-object, or for a number beyond the double range (1e999), naming
// its field.
nlohmann::json parse_json_object(std::string_view body, const ServingInfo& info);

// 413 when a body of `size` bytes is over the limit (the HTTP layer calls this with the
// Content-Length before reading the body).
std::optional<ApiError> check_body_size(size_t size, const ServingInfo& info);

// "model" of a request: absent or the served name -> nullopt; otherwise 404.
std::optional<ApiError> check_model(const std::optional<std::string>& model,
                                    const ServingInfo& info);

// --api-key: when `api_key` is non-empty, `authorization` must be "Bearer <api_key>".
std::optional<ApiError> check_api_key(std::string_view authorization, std::string_view api_key);

}  // namespace troupe::net::openai
