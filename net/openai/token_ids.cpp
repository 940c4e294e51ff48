#include "net/openai/token_ids.h"

#include "kernels/check.h"
#include "net/openai/responses.h"

namespace troupe::net::openai {

TokenIdsWriter::TokenIdsWriter(const GenerationRequest& req)
    : endpoint_(req.endpoint),
      on_(req.return_token_ids),
      prompt_(on_ ? req.prompt_tokens : std::vector<int32_t>()),
      sent_(size_t(req.n), 0),
      prompt_sent_(size_t(req.n), false) {}

void TokenIdsWriter::add_to_response(nlohmann::json& body,
                                     const std::vector<ChoiceResult>& choices) const {
  if (!on_) return;
  nlohmann::json& out = body["choices"];
  TROUPE_CHECK(out.size() == choices.size(), "a body of ", out.size(), " choices for ",
               choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    if (endpoint_ == Endpoint::Completions) out[i]["prompt_token_ids"] = prompt_;
    out[i]["token_ids"] = choices[i].token_ids;
  }
  if (endpoint_ == Endpoint::ChatCompletions) body["prompt_token_ids"] = prompt_;
}

void TokenIdsWriter::add_to_chunk(nlohmann::json& event, const ChoiceResult& c) {
  if (!on_) return;
  const size_t i = size_t(c.index);
  TROUPE_CHECK(i < sent_.size(), "choice index ", c.index, " out of range [0, ", sent_.size(), ")");
  nlohmann::json& choice = event["choices"][0];
  choice["token_ids"] = std::vector<int32_t>(c.token_ids.begin() + std::ptrdiff_t(sent_[i]),
                                             c.token_ids.end());
  sent_[i] = c.token_ids.size();
  const bool chat = endpoint_ == Endpoint::ChatCompletions;
  const size_t key = chat ? 0 : i;
  if (prompt_sent_[key]) return;
  prompt_sent_[key] = true;
  (chat ? event : choice)["prompt_token_ids"] = prompt_;
}

}  // namespace troupe::net::openai
