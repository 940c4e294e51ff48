// model::TextTokenizer: what the serving layers (scheduler stop strings, the OpenAI and
// TCP APIs, the CLI) ask of a model's tokenizer, whatever its kind. model::Tokenizer
// (model/tokenizer.h) implements it for tokenizer.json files and GGUF vocabularies alike.
// Implementations are immutable after loading and may be used from many threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat_template.h"

namespace troupe::model {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;

  // Token ids of text, bos first when add_bos.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
  // Text of ids; skip_special drops special tokens (bos, eos, ...).
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = false) const = 0;
  // Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // The token string of an id, or nullopt where the tokenizer has none to show.
  virtual std::optional<std::string_view> id_to_token(int32_t id) const = 0;
  // The prompt text of a chat in the model's template (bos included when the template
  // starts with it), or nullopt when troupe has no template for this model: chat requests
  // are then refused (completions still work).
  virtual std::optional<std::string> render_chat(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const = 0;
};

}  // namespace troupe::model
