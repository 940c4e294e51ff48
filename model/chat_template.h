// The chat template of MODEL.md §11 (DeepSeek-V3's public one): messages -> prompt
// text, which is then encoded with specials matched literally (Tokenizer::encode with
// add_bos false, since the text starts with bos).
//
//   bos + system contents joined by "\n\n" (wherever they appear in the list)
//       + per turn in order: user -> <｜User｜>content
//                            assistant -> <｜Assistant｜>content<｜end▁of▁sentence｜>
//       + <｜Assistant｜> when add_generation_prompt
#pragma once

#include <string>
#include <vector>

namespace troupe::model {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Throws troupe::Error naming the role for any role other than system, user and
// assistant (an API maps this to HTTP 400).
std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace troupe::model
