// vLLM's `return_token_ids` request extension (vLLM >= 0.10.2): with "return_token_ids":
// true a response also carries the token ids of the prompt and of the output, so a client
// can extend a conversation by ids without re-tokenizing text (a round trip through text
// is not exact: held-back bytes, merges across the seam). Shapes, as vLLM's:
//   completions  every choice {"prompt_token_ids": [...], "token_ids": [...]}
//   chat         the body {"prompt_token_ids": [...]}, every choice {"token_ids": [...]}
// Streams: every chunk's choice has "token_ids", the ids since that choice's last chunk (a
// token whose text is held back goes with the text's chunk, so the chunks' lists joined
// are the non-streamed list); the prompt's ids come once, on a completion choice's first
// chunk, or at the top of a chat stream's first chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "net/openai/request_parse.h"

namespace troupe::net::openai {

struct ChoiceResult;  // responses.h, which holds a writer

class TokenIdsWriter {
 public:
  explicit TokenIdsWriter(const GenerationRequest& req);  // off unless req.return_token_ids

  // A whole non-streamed body of these choices.
  void add_to_response(nlohmann::json& body, const std::vector<ChoiceResult>& choices) const;
  // One stream event (a chunk whose "choices" holds choice c alone), after c took its output.
  void add_to_chunk(nlohmann::json& event, const ChoiceResult& c);

 private:
  Endpoint endpoint_;
  bool on_;
  std::vector<int32_t> prompt_;  // [prompt tokens] when on
  std::vector<size_t> sent_;     // [n] output ids already streamed per choice
  std::vector<bool> prompt_sent_;  // [n] completions: per choice; chat: [0] for the stream
};

}  // namespace troupe::net::openai
