// Non-streaming response bodies in OpenAI's (and vLLM's) shapes, built from the engine's
// RequestOutputs:
//   completion:      {"id": "cmpl-..", "object": "text_completion", "created", "model",
//                     "choices": [{"index", "text", "logprobs", "finish_reason",
//                                  "stop_reason"}], "usage"}
//   chat.completion: {"id": "chatcmpl-..", "object": "chat.completion", ...,
//                     "choices": [{"index", "message": {"role": "assistant", "content"},
//                                  "logprobs", "finish_reason", "stop_reason"}], "usage"}
//   usage:           {"prompt_tokens", "completion_tokens", "total_tokens",
//                     "prompt_tokens_details": {"cached_tokens"}}
// stop_reason is vLLM's: the stop token id or stop string that matched, else null.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/openai/request_parse.h"
#include "net/openai/token_ids.h"
#include "runtime/scheduler/step_plan.h"

namespace troupe::net::openai {

using nlohmann::json;

struct ResponseMeta {
  std::string id;       // make_response_id
  int64_t created = 0;  // unix seconds
  std::string model;
};

// "cmpl-<16 hex digits>" or "chatcmpl-<16 hex digits>" of a server-unique number.
std::string make_response_id(Endpoint endpoint, uint64_t number);

// One sampled token's log-probability and its top alternatives (token text, logprob).
struct TokenLogprob {
  std::string token;  // the token's text
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // [k] the k most likely, most likely first
};

// The API form of the engine's logprobs of one token: texts are the decodes of single ids
// (special tokens included, as vLLM's), logprobs at least -9999 (OpenAI's stand-in for
// -inf; JSON has no infinity).
TokenLogprob token_logprob(const runtime::SampleLogprobs& lp, const model::TextTokenizer& tok);

// One choice, accumulated from the RequestOutputs of its engine request.
struct ChoiceResult {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;  // "stop", "length", "abort", "error"; empty while running
  runtime::StopReason stop_reason;
  int64_t num_cached_tokens = 0;  // prefix-cache hit of the prompt
  int64_t num_restored_tokens = 0;  // kv_restore's saved tokens before the prompt
  std::vector<TokenLogprob> logprobs;

  // Adds the output's text, tokens and finish state; with a tokenizer also the logprobs
  // of its tokens (when the engine computed them).
  void append(const runtime::RequestOutput& out, const model::TextTokenizer* tok = nullptr);
  bool finished() const { return !finish_reason.empty(); }
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;

  json to_json() const;
};

// Usage of a request with these choices: the prompt counted once (as OpenAI does for n > 1),
// output summed, cached tokens of choice 0.
Usage usage_of(int64_t prompt_tokens, const std::vector<ChoiceResult>& choices);

json stop_reason_json(const runtime::StopReason& r);
json finish_reason_json(const std::string& finish_reason);  // null while running
// Logprobs of a choice in the endpoint's shape: completions {"tokens", "token_logprobs",
// "top_logprobs", "text_offset"}, each top_logprobs entry the top k plus the sampled token
// (k or k + 1 entries, as vLLM), text_offset in code points from `text_offset` (where the
// tokens' text starts in the choice: a stream's later chunks); chat {"content": [{"token",
// "logprob", "bytes", "top_logprobs"}]}, top_logprobs the k most likely.
json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs,
                   size_t text_offset = 0);
// Code points of the tokens' texts: where the text_offset of the tokens after them starts.
size_t logprobs_text_length(const std::vector<TokenLogprob>& logprobs);

// The whole non-streaming body; logprobs are written when `with_logprobs`, else null.
json generation_response(Endpoint endpoint, const ResponseMeta& meta,
                         const std::vector<ChoiceResult>& choices, const Usage& usage,
                         bool with_logprobs);

// Collects the outputs of a non-streaming request's n choices into its response body.
class ResponseCollector {
 public:
  // tok renders the logprobs' token texts; without one they are left out.
  ResponseCollector(const GenerationRequest& req, ResponseMeta meta,
                    const model::TextTokenizer* tok = nullptr);
  void on_output(int32_t index, const runtime::RequestOutput& out);  // index in [0, n)
  bool done() const;                                                 // every choice finished
  json response() const;
  const std::vector<ChoiceResult>& choices() const { return choices_; }

 private:
  Endpoint endpoint_;
  ResponseMeta meta_;
  int64_t prompt_tokens_;
  bool with_logprobs_;
  const model::TextTokenizer* tok_;
  std::vector<ChoiceResult> choices_;
  TokenIdsWriter token_ids_;
};

// GET /v1/models.
json models_response(const ServingInfo& info, int64_t created);

// A JSON body as text; invalid UTF-8 is replaced rather than thrown on.
std::string dump_json(const json& j);

}  // namespace troupe::net::openai
