// Internal state of a Tokenizer, shared by tokenizer_load.cpp (which fills it from a
// tokenizer.json) and tokenizer.cpp (which encodes and decodes with it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/bpe.h"
#include "model/gguf_tokenizer.h"
#include "model/pre_split.h"
#include "model/tokenizer.h"

namespace troupe::model {

enum class TokenKind : uint8_t { None, Vocab, Added, Special };

struct AddedToken {
  std::string content;  // matched literally in input text
  int32_t id = 0;
  bool special = false;
};

// Pre-tokenized words -> ids. Words repeat a lot in real text, and BPE on a word is the
// costly step. Bounded: cleared when full, which changes speed, never results.
class WordCache {
 public:
  std::optional<std::vector<int32_t>> get(std::string_view word) const;
  void put(std::string_view word, const std::vector<int32_t>& ids) const;

  static constexpr size_t kMaxWordBytes = 128;
  static constexpr size_t kMaxEntries = 1 << 16;

 private:
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> map_;
};

struct Tokenizer::Impl {
  std::unordered_map<std::string, int32_t> vocab;  // byte-level spelling -> id
  std::vector<std::string> tokens;                 // [vocab_size] spelling or added content
  std::vector<TokenKind> kinds;                    // [vocab_size]
  std::vector<std::string> bytes;                  // [vocab_size] what decode emits per id
  BpeMerges merges;
  std::array<int32_t, 256> byte_ids{};  // byte b -> id of its one-character token
  std::vector<AddedToken> added;        // longest content first
  std::array<std::vector<uint32_t>, 256> added_by_first_byte;  // indices into added
  PreSplit split = PreSplit::Gpt2;  // the pre-tokenizer split before BPE
  bool ignore_merges = false;  // HF option: a word that is a vocab token is taken whole
  SpecialTokenIds specials;
  WordCache cache;
  std::unique_ptr<SpmTokenizer> spm;  // a GGUF SentencePiece-style vocabulary: encodes instead
  bool add_bos = true;
  ChatFormat chat = ChatFormat::DeepSeekV3;

  // The id of a token string (added tokens first, then the vocab), or -1.
  int32_t find(std::string_view token) const;
  // The longest added token that starts at text[pos], or nullptr.
  const AddedToken* match_added(std::string_view text, size_t pos) const;
};

// Builds the state from tokenizer.json text, and the tokenizer_config.json beside it when
// config_text is not empty (its bos/eos/pad, add_bos_token and chat template; without it
// the specials are MODEL.md §11's); throws troupe::Error on a bad file.
std::unique_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view json_text,
                                                      std::string_view config_text = {});

// After the vocab, merges and added tokens are in: the byte tokens' ids (an error naming
// vocabulary when one is missing), the added tokens longest first and indexed by first
// byte, and what each id decodes to.
void index_byte_level_tokens(Tokenizer::Impl& t, const char* vocabulary);

}  // namespace troupe::model
