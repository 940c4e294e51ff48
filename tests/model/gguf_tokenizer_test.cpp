// The GGUF SentencePiece-style tokenizer on a small hand-made vocabulary: hand-worked
// merges (score order, not length, decides), byte fallback, round trips, and random texts
// against a plain reference of the merge rule written here on strings.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"

namespace troupe::model {
namespace {

using Type = SpmTokenizer::TokenType;
const std::string kSp = "\xE2\x96\x81";

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<Type> types;
  void add(const std::string& t, float s, Type type = Type::Normal) {
    tokens.push_back(t);
    scores.push_back(s);
    types.push_back(type);
  }
};

// 0 <unk>, 1 <s>, 2 </s>, 3..258 the byte tokens, then the pieces.
Vocab small_vocab() {
  Vocab v;
  v.add("<unk>", 0, Type::Unknown);
  v.add("<s>", 0, Type::Control);
  v.add("</s>", 0, Type::Control);
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.add(buf, 0, Type::Byte);
  }
  for (auto [t, s] : std::vector<std::pair<std::string, float>>{
           {kSp, -1}, {"h", -2}, {"e", -2}, {"l", -2}, {"o", -2}, {"he", -3}, {"ll", -1.5f},
           {"llo", -1}, {kSp + "he", -4}, {"hello", -0.5f}, {kSp + "o", -2.5f}, {"oh", -2.5f}})
    v.add(t, s);
  return v;
}

SpmTokenizer make(const Vocab& v) { return SpmTokenizer(v.tokens, v.scores, v.types, 1, 2, 0, true, true); }

int32_t id_of(const Vocab& v, const std::string& t) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == t) return int32_t(i);
  return -1;
}

// The merge rule on strings: each round, the adjacent pair with the best score (leftmost on
// ties) whose concatenation is a normal token merges; leftovers fall back to byte tokens.
std::vector<int32_t> ref_encode(const Vocab& v, const std::string& text) {
  std::string s = kSp;
  for (char c : text) s += c == ' ' ? kSp : std::string(1, c);
  std::vector<std::string> sym;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    sym.push_back(s.substr(i, n));
    i += n;
  }
  auto normal_id = [&](const std::string& t) {
    const int32_t id = id_of(v, t);
    return id >= 0 && v.types[id] == Type::Normal ? id : -1;
  };
  while (true) {
    int best = -1;
    for (int i = 0; i + 1 < int(sym.size()); ++i) {
      const int32_t id = normal_id(sym[i] + sym[i + 1]);
      if (id >= 0 && (best < 0 || v.scores[id] > v.scores[normal_id(sym[best] + sym[best + 1])])) best = i;
    }
    if (best < 0) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + best + 1);
  }
  std::vector<int32_t> ids{1};
  for (const std::string& t : sym) {
    if (normal_id(t) >= 0) {
      ids.push_back(normal_id(t));
    } else {
      for (unsigned char c : t) ids.push_back(3 + c);
    }
  }
  return ids;
}

TEST(GgufTokenizer, MergesByScoreThenFallsBackToBytes) {
  const Vocab v = small_vocab();
  const SpmTokenizer t = make(v);
  // ▁ h e l l o: ll (-1.5), then llo (-1), then he (-3), then hello (-0.5) beats ▁he (-4).
  EXPECT_EQ(t.encode("hello", true), (std::vector<int32_t>{1, id_of(v, kSp), id_of(v, "hello")}));
  EXPECT_EQ(t.encode("hello", false), (std::vector<int32_t>{id_of(v, kSp), id_of(v, "hello")}));
  // é is not a token: its two UTF-8 bytes become byte tokens.
  EXPECT_EQ(t.encode("oé", false), (std::vector<int32_t>{id_of(v, kSp + "o"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(t.encode("oé", true)), "oé");
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
}

TEST(GgufTokenizer, RandomTextsMatchTheReferenceAndRoundTrip) {
  const Vocab v = small_vocab();
  const SpmTokenizer t = make(v);
  const std::vector<std::string> alphabet{"h", "e", "l", "o", " ", "é", "\xF0\x9F\x98\x80", "x"};
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (int n = int(rng() % 14); n > 0; --n) s += alphabet[rng() % alphabet.size()];
    if (s.empty()) continue;
    EXPECT_EQ(t.encode(s, true), ref_encode(v, s)) << "'" << s << "'";
    EXPECT_EQ(t.decode(t.encode(s, true)), s);
  }
}

TEST(GgufTokenizer, ReadsTheVocabularyFromGgufMetadata) {
  const Vocab v = small_vocab();
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", v.tokens);
  w.set_f32s("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types;
  for (Type x : v.types) types.push_back(int32_t(x));
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  const auto bytes = w.bytes();
  const SpmTokenizer t = SpmTokenizer::from_gguf(GgufFile::parse(bytes, "t.gguf"));
  EXPECT_EQ(t.encode("hello oh", true), ref_encode(v, "hello oh"));
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);

  GgufWriter g;
  g.set_string("tokenizer.ggml.model", "gpt2");
  const auto gb = g.bytes();
  try {
    SpmTokenizer::from_gguf(GgufFile::parse(gb, "g.gguf"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'gpt2' is not supported yet"), std::string::npos);
  }
}

}  // namespace
}  // namespace troupe::model
