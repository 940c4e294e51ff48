// The tiny tokenizer builder (MODEL.md §11 layout), loaded back with Tokenizer.
#include "model/tokenizer_builder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/tiny_corpus.h"
#include "model/tokenizer.h"

namespace troupe::model {
namespace {

const std::string& tiny_json() {
  static const std::string text = build_tiny_tokenizer_json(4096);
  return text;
}

TEST(TinyTokenizer, SameBytesOnEveryCall) {
  EXPECT_EQ(build_tiny_tokenizer_json(4096), tiny_json());
}

TEST(TinyTokenizer, HasTheLayoutOfModelMd) {
  const Tokenizer t = Tokenizer::from_json(tiny_json());
  EXPECT_EQ(t.vocab_size(), 4096);
  const SpecialTokenIds& s = t.specials();
  EXPECT_EQ(s.bos, 0);
  EXPECT_EQ(s.eos, 1);
  EXPECT_EQ(s.pad, 2);
  EXPECT_EQ(s.user, 3);
  EXPECT_EQ(s.assistant, 4);
  EXPECT_EQ(s.noise, 4095);
  for (int32_t id : {0, 1, 2, 3, 4, 4095}) EXPECT_TRUE(t.is_special(id)) << id;
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(t.id_to_token(5 + b), byte_to_unicode(static_cast<uint8_t>(b)));
  for (int32_t id = 261; id < 4095; ++id) {
    ASSERT_TRUE(t.id_to_token(id).has_value()) << id;
    EXPECT_GE(t.id_to_token(id)->size(), 2u) << id;  // merged tokens join two or more characters
    EXPECT_FALSE(t.is_special(id));
  }
  const auto j = nlohmann::json::parse(tiny_json());
  EXPECT_EQ(j["added_tokens"].size(), 6u);
  EXPECT_GE(j["model"]["merges"].size(), 4096u - 262u);
}

TEST(TinyTokenizer, RoundTripsAndCompressesEnglish) {
  const Tokenizer t = Tokenizer::from_json(tiny_json());
  const std::string prose(tiny_corpus_prose());
  const std::vector<int32_t> ids = t.encode(prose, false);
  EXPECT_EQ(t.decode(ids), prose);
  EXPECT_LT(ids.size() * 3, prose.size());  // learned merges: well under a token per 3 bytes
  for (int32_t id : ids) EXPECT_NE(id, 4095);
  for (const std::string s :
       {"Hello, world! 12345 ünïcödé 中文 🎉", "<｜User｜>hi<｜Assistant｜>", "  x\t\n"}) {
    EXPECT_EQ(t.decode(t.encode(s, true), /*skip_special=*/false), std::string(kBosToken) + s);
  }
  EXPECT_EQ(t.encode(" the", false).size(), 1u);
}

// Pins the learned merges: ids computed from the built file by an independent
// implementation (HF tokenizers.js). A change to the corpus or the trainer shows here.
TEST(TinyTokenizer, EncodesLikeAnIndependentImplementation) {
  const Tokenizer t = Tokenizer::from_json(tiny_json());
  EXPECT_EQ(t.encode("Once upon a time", false), (std::vector<int32_t>{1080, 339, 2113, 263, 599}));
  EXPECT_EQ(t.encode("Hello world's  123!", false),
            (std::vector<int32_t>{77, 451, 116, 1199, 367, 1555, 37, 3146, 38}));
}

TEST(TinyTokenizer, OtherSizes) {
  const Tokenizer smallest = Tokenizer::from_json(build_tiny_tokenizer_json(262));
  EXPECT_EQ(smallest.vocab_size(), 262);
  EXPECT_EQ(smallest.specials().noise, 261);
  EXPECT_EQ(smallest.encode("ab", false), (std::vector<int32_t>{5 + 'a', 5 + 'b'}));  // no merges
  const Tokenizer small = Tokenizer::from_json(build_tiny_tokenizer_json(300));
  EXPECT_EQ(small.vocab_size(), 300);
  EXPECT_EQ(small.specials().noise, 299);
  EXPECT_THROW(build_tiny_tokenizer_json(261), Error);
  EXPECT_THROW(build_tiny_tokenizer_json(60000), Error);  // more than the corpus can learn
}

}  // namespace
}  // namespace troupe::model
