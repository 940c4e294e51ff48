// Request prompts -> token ids (MODEL.md §11).
//   /v1/completions "prompt": a string (encoded with bos prepended, no template) or a
//     list of token ids (used as given); a one-element list of either is unwrapped.
//     Batches of several prompts are refused (one prompt per request).
//   /v1/chat/completions "messages": [{"role", "content"}] with roles system, user and
//     assistant; content a string, null, or a list of {"type": "text", "text"} parts
//     (joined). Rendered by render_chat, then encoded with specials and no extra bos.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/chat_template.h"

namespace troupe::model {
class TextTokenizer;
}

namespace troupe::net::openai {

struct EncodedPrompt {
  std::vector<int32_t> tokens;
  std::string text;  // the text that was encoded; empty for a token-id prompt
};

// Throws ApiException (400, param "prompt") for a missing, empty or ill-typed prompt.
EncodedPrompt encode_completion_prompt(const nlohmann::json& body, const model::TextTokenizer& tok,
                                       bool add_special_tokens = true);

// Throws ApiException (400, param "messages" or "messages[i].role" / ".content").
std::vector<model::ChatMessage> parse_messages(const nlohmann::json& body);
EncodedPrompt encode_chat_prompt(const std::vector<model::ChatMessage>& messages,
                                 const model::TextTokenizer& tok, bool add_generation_prompt);

}  // namespace troupe::net::openai
