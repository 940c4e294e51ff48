// The SentencePiece-style vocabulary a GGUF file embeds (tokenizer.ggml.model = "llama"):
// tokens, their scores and types, encoded the way SentencePiece's BPE model does:
//
//   text -> (" " prefix when add_space_prefix) -> every " " becomes "▁" (U+2581)
//        -> one symbol per UTF-8 character
//        -> repeatedly merge the adjacent pair whose concatenation is a token with the
//           highest score (ties -> the leftmost pair) until no pair is a token
//        -> each symbol's id; a symbol that is not a token becomes its bytes' <0xXX>
//           tokens (byte fallback), or the unknown token when the file has none
//
// User-defined tokens (type 4) are matched literally in the text before any of that, and
// control tokens (type 3, e.g. <s>) too when parse_special: the text is cut at each
// match, longest first, and the pieces between are encoded on their own, each with the
// space prefix when it follows bos or a matched token (llama.cpp's reading; a chat
// template's "<s>[INST] hi" encodes as <s>, "▁[", "INST", ...).
//
// Decoding maps "▁" back to " ", <0xXX> tokens to their byte, drops control tokens (or
// writes their text, keep_special), and removes the one leading space the prefix added.
// GPT-2 BPE vocabularies (tokenizer.ggml.model = "gpt2") are model::Tokenizer's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::model {

class GgufFile;

class SpmTokenizer {
 public:
  enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, User = 4, Unused = 5, Byte = 6 };

  static SpmTokenizer from_gguf(const GgufFile& f);
  // tokens, scores (one per token) and types (empty: all Normal); bos/eos/unk -1 if none.
  SpmTokenizer(std::vector<std::string> tokens, std::vector<float> scores,
               std::vector<TokenType> types, int32_t bos, int32_t eos, int32_t unk,
               bool add_space_prefix, bool add_bos);

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // Unknown ids are skipped. strip_prefix_space: drop the leading space the prefix added
  // (for a text from its start; false for a continuation).
  std::string decode(std::span<const int32_t> ids, bool strip_prefix_space = true,
                     bool keep_special = false) const;
  std::string_view piece(int32_t id) const { return tokens_[id]; }
  TokenType type(int32_t id) const { return types_[id]; }

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool adds_bos() const { return add_bos_; }

 private:
  int32_t find(std::string_view piece) const;  // -1 when not a token
  // The merges and byte fallback on one piece of text (no literal tokens in it).
  void encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
  // The longest literal token (user-defined, or control when parse_special) at text[pos].
  int32_t match_literal(std::string_view text, size_t pos, bool parse_special) const;
  std::vector<int32_t> literals_;  // user-defined and control ids, longest text first
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t byte_ids_[256];
  int32_t bos_, eos_, unk_;
  bool add_space_prefix_, add_bos_;
};

}  // namespace troupe::model
