// Streaming responses as server-sent events (stream: true), OpenAI's framing:
//
//   data: {chunk}\n\n        one per piece of new text (per choice)
//   data: {chunk}\n\n        the choice's last chunk carries finish_reason and stop_reason
//   data: {usage chunk}\n\n  only with stream_options.include_usage: "choices": [] and usage
//   data: [DONE]\n\n
//
// Chunks: completions {"id", "object": "text_completion", "created", "model",
// "choices": [{"index", "text", "logprobs", "finish_reason", "stop_reason"}]};
// chat {"object": "chat.completion.chunk", ..., "choices": [{"index", "delta", "logprobs",
// "finish_reason", "stop_reason"}]}, the first delta of each choice {"role": "assistant",
// "content": ""}. With include_usage every chunk has "usage": null (as OpenAI sends).
// With logprobs a chunk carries those of the tokens since the choice's last chunk (a token
// whose text is held back - a stop-string prefix, an incomplete character - goes with the
// text's chunk), so the chunks' lists joined are the non-streamed list. With
// return_token_ids chunks carry token ids the same way (token_ids.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/openai/responses.h"

namespace troupe::net::openai {

std::string sse_data(const json& payload);  // "data: <payload>\n\n"
std::string_view sse_done();                // "data: [DONE]\n\n"

class StreamEncoder {
 public:
  // tok renders the logprobs' token texts; without one they are left out.
  StreamEncoder(const GenerationRequest& req, ResponseMeta meta,
                const model::TextTokenizer* tok = nullptr);

  // The events sent before any output: chat's role delta of every choice; none for
  // completions.
  std::string start();
  // The events of one choice's output; empty when it carries no text and does not finish.
  std::string on_output(int32_t index, const runtime::RequestOutput& out);
  // After every choice finished: the usage chunk (when asked for) and [DONE].
  std::string finish() const;
  // A failure after the stream started: an error event, then [DONE].
  std::string error(const ApiError& err) const;

  bool done() const;
  Usage usage() const { return usage_of(prompt_tokens_, choices_); }

 private:
  json envelope() const;  // id, object, created, model
  json chunk(json choice) const;
  json take_logprobs(ChoiceResult& c, size_t& text_offset) const;

  Endpoint endpoint_;
  ResponseMeta meta_;
  int64_t prompt_tokens_;
  bool include_usage_;
  bool with_logprobs_;
  const model::TextTokenizer* tok_;
  std::vector<ChoiceResult> choices_;  // tokens, finish state, logprobs not yet sent
  std::vector<size_t> text_offsets_;   // [n] code points of the logprob tokens already sent
  TokenIdsWriter token_ids_;           // return_token_ids
};

}  // namespace troupe::net::openai
