// A GGUF file's SentencePiece-style vocabulary (model/gguf_tokenizer.h) behind the
// serving layers' TextTokenizer interface, so `troupe serve x.gguf` answers in the file's
// own tokens. Output text is a continuation of the prompt: decoding keeps a leading space
// (the one a "▁" piece stands for). No chat template yet (render_chat: nullopt).
#pragma once

#include "model/gguf_tokenizer.h"
#include "model/text_tokenizer.h"

namespace troupe::model {

class GgufTextTokenizer final : public TextTokenizer {
 public:
  explicit GgufTextTokenizer(const SpmTokenizer& spm) : spm_(spm) {}  // spm outlives this

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  // skip_special: SentencePiece decoding drops control tokens always.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return spm_.size(); }
  std::optional<std::string_view> id_to_token(int32_t) const override { return std::nullopt; }
  std::optional<std::string> render_chat(const std::vector<ChatMessage>&, bool) const override {
    return std::nullopt;
  }

 private:
  const SpmTokenizer& spm_;
};

}  // namespace troupe::model
