// Tokenizer::from_gguf: the vocabulary a GGUF file embeds (tokenizer.ggml.*), as the
// serving tokenizer. A "gpt2" vocabulary fills the same byte-level BPE state a
// tokenizer.json does; a "llama" one is SpmTokenizer's, with the ids' spellings and kinds
// kept here for id_to_token, is_special and the chat template's bos/eos texts.
#include <algorithm>

#include "kernels/check.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_impl.h"

namespace troupe::model {
namespace {

using TokenType = SpmTokenizer::TokenType;

int32_t id_or_none(const GgufFile& f, const std::string& key, size_t vocab) {
  if (!f.find(key)) return -1;
  const uint64_t id = f.get_uint(key);
  if (id >= vocab) TROUPE_FAIL(f.source() << ": " << key << " = " << id << " is outside the " << vocab << " tokens");
  return static_cast<int32_t>(id);
}

bool flag_or(const GgufFile& f, const std::string& key, bool fallback) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  if (const auto* b = std::get_if<bool>(&v->value)) return *b;
  TROUPE_FAIL(f.source() << ": metadata key '" << key << "' must be a bool");
}

const std::vector<std::string>& token_strings(const GgufFile& f) {
  const GgufArray& tokens = f.get_array("tokenizer.ggml.tokens");
  if (tokens.elem != GgufType::STRING || tokens.strings.empty())
    TROUPE_FAIL(f.source() << ": tokenizer.ggml.tokens must be a non-empty array of strings");
  return tokens.strings;
}

std::vector<TokenType> token_types(const GgufFile& f, size_t n) {
  std::vector<TokenType> types(n, TokenType::Normal);
  if (!f.find("tokenizer.ggml.token_type")) return types;
  const GgufArray& t = f.get_array("tokenizer.ggml.token_type");
  if (t.ints.size() != n)
    TROUPE_FAIL(f.source() << ": tokenizer.ggml.token_type has " << t.size() << " entries for " << n << " tokens");
  for (size_t i = 0; i < n; ++i) {
    if (t.ints[i] < 1 || t.ints[i] > 6) TROUPE_FAIL(f.source() << ": token " << i << " has unknown type " << t.ints[i]);
    types[i] = static_cast<TokenType>(t.ints[i]);
  }
  return types;
}

// tokenizer.ggml.pre -> the split before BPE. The names are llama.cpp's converter's.
PreSplit split_of(const GgufFile& f) {
  if (!f.find("tokenizer.ggml.pre")) return PreSplit::Gpt2;  // the vocabulary's own name
  const std::string pre = f.get_string("tokenizer.ggml.pre");
  if (pre == "gpt2" || pre == "default") return PreSplit::Gpt2;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") return PreSplit::Llama3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return PreSplit::Qwen2;
  TROUPE_FAIL(f.source() << ": tokenizer.ggml.pre '" << pre
                         << "' is not supported (troupe splits as gpt2, llama-bpe and qwen2)");
}

// Spellings and kinds per id; control tokens are special added tokens and user-defined
// ones plain added tokens, both matched literally (in a "gpt2" vocabulary; SpmTokenizer
// matches them itself).
void add_tokens(Tokenizer::Impl& t, const std::vector<std::string>& tokens,
                const std::vector<TokenType>& types, bool as_added) {
  const size_t n = tokens.size();
  t.tokens = tokens;
  t.kinds.assign(n, TokenKind::Vocab);
  for (size_t id = 0; id < n; ++id) {
    const int32_t i = static_cast<int32_t>(id);
    if (types[id] == TokenType::Control) t.kinds[id] = TokenKind::Special;
    if (types[id] == TokenType::User) t.kinds[id] = TokenKind::Added;
    t.vocab.emplace(tokens[id], i);  // the first of duplicate spellings wins
    if (as_added && t.kinds[id] != TokenKind::Vocab && !tokens[id].empty())
      t.added.push_back({tokens[id], i, t.kinds[id] == TokenKind::Special});
  }
}

void read_merges(const GgufFile& f, Tokenizer::Impl& t) {
  const GgufArray& merges = f.get_array("tokenizer.ggml.merges");
  if (merges.elem != GgufType::STRING) TROUPE_FAIL(f.source() << ": tokenizer.ggml.merges must be strings");
  auto id_of = [&](const std::string& token, size_t i) {
    auto it = t.vocab.find(token);
    if (it == t.vocab.end())
      TROUPE_FAIL(f.source() << ": tokenizer.ggml.merges[" << i << "] refers to unknown token '" << token << "'");
    return it->second;
  };
  for (size_t i = 0; i < merges.strings.size(); ++i) {
    const std::string& m = merges.strings[i];
    const size_t space = m.find(' ');
    if (space == m.npos || m.find(' ', space + 1) != m.npos)
      TROUPE_FAIL(f.source() << ": tokenizer.ggml.merges[" << i << "] = '" << m << "' is not two tokens");
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const int32_t l = id_of(left, i);
    const int32_t r = id_of(right, i);
    t.merges.add(l, r, id_of(left + right, i));
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  const std::string kind = f.get_string("tokenizer.ggml.model");
  auto t = std::make_unique<Impl>();
  const std::vector<std::string>& tokens = token_strings(f);
  const size_t n = tokens.size();
  if (kind == "llama") {
    t->spm = std::make_unique<SpmTokenizer>(SpmTokenizer::from_gguf(f));
    add_tokens(*t, tokens, token_types(f, n), /*as_added=*/false);
    t->add_bos = flag_or(f, "tokenizer.ggml.add_bos_token", true);
  } else if (kind == "gpt2") {
    t->split = split_of(f);
    add_tokens(*t, tokens, token_types(f, n), /*as_added=*/true);
    read_merges(f, *t);
    index_byte_level_tokens(*t, (f.source() + ": tokenizer.ggml.tokens").c_str());
    t->add_bos = flag_or(f, "tokenizer.ggml.add_bos_token", false);
  } else {
    TROUPE_FAIL(f.source() << ": tokenizer.ggml.model '" << kind
                           << "' is not supported (troupe reads 'llama' and 'gpt2' vocabularies)");
  }
  SpecialTokenIds& s = t->specials;
  s.bos = id_or_none(f, "tokenizer.ggml.bos_token_id", n);
  s.eos = id_or_none(f, "tokenizer.ggml.eos_token_id", n);
  s.pad = id_or_none(f, "tokenizer.ggml.padding_token_id", n);
  s.eot = id_or_none(f, "tokenizer.ggml.eot_token_id", n);
  if (t->add_bos && s.bos < 0) t->add_bos = false;
  t->chat = f.find("tokenizer.chat_template") ? detect_chat_format(f.get_string("tokenizer.chat_template"))
                                              : ChatFormat::None;
  return Tokenizer(std::move(t));
}

}  // namespace troupe::model
