// The serving tokenizer: encode text to token ids and decode ids to text. Three sources:
// - HF tokenizer.json byte-level BPE (MODEL.md §11; V4.1 models), described below;
// - a GGUF file's GPT-2 BPE vocabulary (tokenizer.ggml.model "gpt2"): the same BPE, its
//   vocabulary, merges and pre-tokenizer split (tokenizer.ggml.pre) read from the file,
//   control and user-defined tokens matched literally as added tokens;
// - a GGUF file's SentencePiece-style vocabulary ("llama"): SpmTokenizer (gguf_tokenizer.h)
//   with control and user-defined tokens matched literally.
// from_gguf also reads the file's chat template family (chat_template.h).
//
// Supported files: model.type "BPE" (vocab map; merges as "a b" strings or [a, b]
// pairs, ranked in file order), no normalizer, and a pre_tokenizer that is either
// ByteLevel (use_regex true: the GPT-2 split; false: no split) with add_prefix_space
// false, or a Sequence of a Split on the GPT-2, LLaMA-3 or Qwen2 regex (pre_split.h;
// behavior Isolated) then such a ByteLevel with use_regex false. added_tokens are matched literally in the input
// before BPE, longest first, and never split. Anything else is rejected with a
// troupe::Error that says what is unsupported.
//
// Encoding never fails: each byte of ill-formed UTF-8 becomes its own byte token.
// Decoding follows HF: byte-level tokens map back to bytes, added tokens give their
// content, ids the file does not define are skipped, and the bytes are then read as
// UTF-8 with each ill-formed sequence replaced by U+FFFD (HF's from_utf8_lossy,
// Python's errors="replace"), so decode always returns valid UTF-8.
//
// A Tokenizer is immutable after loading; encode/decode may run on many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/text_tokenizer.h"

namespace troupe::model {

class GgufFile;

// The literal special tokens of MODEL.md §11.
inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kPadToken = "<｜▁pad▁｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kNoiseToken = "<｜dspark▁noise｜>";  // DSpark (§8)

// Ids of the special tokens, found by their literal strings; -1 where the file has
// none. bos and eos are required to load.
struct SpecialTokenIds {
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t pad = -1;
  int32_t user = -1;
  int32_t assistant = -1;
  int32_t noise = -1;
  int32_t eot = -1;  // end of turn, where it differs from eos (GGUF eot_token_id)
};

class Tokenizer final : public TextTokenizer {
 public:
  // A tokenizer.json file, with the tokenizer_config.json beside it when there is one.
  static Tokenizer load(const std::string& path);
  // config_text: a tokenizer_config.json's text, or empty (the specials are MODEL.md's).
  static Tokenizer from_json(std::string_view json_text, std::string_view config_text = {});
  // The vocabulary a GGUF file embeds; throws troupe::Error naming what it cannot read.
  static Tokenizer from_gguf(const GgufFile& file);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Token ids of text, bos first when add_bos and the vocabulary adds one (adds_bos).
  // Special tokens written literally in text encode to their ids.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  // Text of ids; skip_special drops special added tokens (bos, eos, ...).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const override;

  // 1 + the largest id of the vocab and added tokens.
  int64_t vocab_size() const override;
  const SpecialTokenIds& specials() const;
  // The token string of an id (byte-level spelling, e.g. "Ġtime"; an added token's
  // content), or nullopt for an id the file does not define.
  std::optional<std::string_view> id_to_token(int32_t id) const override;
  // The model's chat format (chat_format(); model/chat_template.h), nullopt when none.
  std::optional<std::string> render_chat(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  // Whether encode(text, true) puts bos first (tokenizer.json: always; GGUF: the file's
  // add_bos_token).
  bool adds_bos() const;
  // The chat format of the model (tokenizer.json: MODEL.md §11's; GGUF: the family of the
  // file's template) and the bos/eos texts it writes.
  ChatFormat chat_format() const;
  ChatSpecials chat_specials() const;

  struct Impl;  // defined in tokenizer_impl.h

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::model
