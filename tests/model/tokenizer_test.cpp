// Tokenizer: the golden tiny tokenizer's encodings, the GPT-2 split against hand-worked
// pieces, BPE rank rules on hand-built files, round trips, invalid UTF-8 and bad files.
// Expected ids not from generate-text.json were computed by an independent
// implementation (HF tokenizers.js, on the golden file with duplicate merges dropped
// after their first listing, MODEL.md §11's file-order rank) and checked by hand.
#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/pre_split.h"
#include "model/utf8.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kGolden = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

const Tokenizer& golden() {
  static const Tokenizer t = Tokenizer::load(kGolden + "/tokenizer.json");
  return t;
}

int32_t byte_id(uint8_t b) {
  return 5 + b;
}  // the tiny layout: id 5 + b is byte b

// ---- golden file ------------------------------------------------------------------------

TEST(TokenizerGolden, EncodesThePromptOfGenerateText) {
  const json g = read_json(kGolden + "/generate-text.json");
  const std::string prompt_text = g["prompt_text"];
  const std::string text = prompt_text.substr(kBosToken.size());
  ASSERT_EQ(text, "Once upon a time");
  EXPECT_EQ(golden().encode(text, /*add_bos=*/true), g["prompt"].get<Ids>());
  // bos written literally is the special token, so the whole prompt text encodes the same.
  EXPECT_EQ(golden().encode(prompt_text, false), g["prompt"].get<Ids>());
}

TEST(TokenizerGolden, DecodesGeneratedText) {
  const json g = read_json(kGolden + "/generate-text.json");
  EXPECT_EQ(golden().decode(g["generated"].get<Ids>()), g["generated_text"].get<std::string>());
  EXPECT_EQ(golden().decode(g["prompt"].get<Ids>()), g["prompt_text"].get<std::string>());
}

TEST(TokenizerGolden, EncodesLikeAnIndependentImplementation) {
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"Hello world's  123!", {77, 329, 276, 282, 280, 2475, 430, 37, 1859, 38}},
      {"  leading", {37, 355, 106, 362, 308}},
      {"trailing   ", {121, 989, 261, 37}},
      {"a\t\tb\n\nc\r\n\r\nd", {102, 14, 14, 103, 15, 15, 104, 18, 15, 18, 15, 105}},
      {"é café naïve", {468, 1363, 1417}},
      {"emoji 🎉🎉 party 👍🏽",
       {106, 114, 116, 111, 110, 1574, 279, 147, 142, 281, 301, 578, 1577, 279, 148, 194}},
      {"<｜User｜>hi<｜Assistant｜>yo<｜end▁of▁sentence｜>", {3, 344, 4, 126, 116, 1}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(golden().encode(text, false), ids) << text;
}

TEST(TokenizerGolden, Accessors) {
  const Tokenizer& t = golden();
  EXPECT_EQ(t.vocab_size(), 4096);
  const SpecialTokenIds& s = t.specials();
  EXPECT_EQ(s.bos, 0);
  EXPECT_EQ(s.eos, 1);
  EXPECT_EQ(s.pad, 2);
  EXPECT_EQ(s.user, 3);
  EXPECT_EQ(s.assistant, 4);
  EXPECT_EQ(s.noise, 4095);
  EXPECT_EQ(t.id_to_token(1470), "Ġtime");
  EXPECT_EQ(t.id_to_token(0), kBosToken);
  EXPECT_EQ(t.id_to_token(byte_id(' ')), "Ġ");
  EXPECT_EQ(t.id_to_token(-1), std::nullopt);
  EXPECT_EQ(t.id_to_token(4096), std::nullopt);
  EXPECT_EQ(t.token_to_id("Ġtime"), 1470);
  EXPECT_EQ(t.token_to_id(kAssistantToken), 4);
  EXPECT_EQ(t.token_to_id("no such token"), std::nullopt);
  EXPECT_TRUE(t.is_special(0));
  EXPECT_TRUE(t.is_special(4095));
  EXPECT_FALSE(t.is_special(1470));
  EXPECT_FALSE(t.is_special(-3));
}

// ---- round trips, specials, invalid UTF-8 -----------------------------------------------

TEST(TokenizerRoundTrip, DecodeOfEncodeGivesTheText) {
  const std::vector<std::string> texts = {"",
                                          "a",
                                          "The quick brown fox jumps over the lazy dog.",
                                          "é café naïve",
                                          "中文字符测试，你好！",
                                          "emoji 🎉 party 👍🏽 family 👨‍👩‍👧",
                                          "e\u0301 a\u0308\u0323 combining",
                                          "   runs  of\t\twhite\n\n\nspace  ",
                                          "1234567890 3.14159 1,000,000",
                                          "punct: !@#$%^&*()[]{};:'\",.<>/?\\|`~",
                                          "I'm he'll we've she'd it's DON'T",
                                          "Γειά σου Κόσμε Привет мир مرحبا",
                                          "\u00a0nbsp\u2003em\u3000ideo\u2028ls\u0085nel",
                                          "<｜User｜>hi<｜Assistant｜>yo<｜end▁of▁sentence｜>",
                                          "<｜begin▁of▁sentence｜><｜▁pad▁｜><｜dspark▁noise｜>",
                                          "<｜User no close ｜> <｜ >",
                                          "\x01\x02\x7f control"};
  for (const std::string& s : texts) EXPECT_EQ(golden().decode(golden().encode(s, false)), s) << s;
}

TEST(TokenizerRoundTrip, SpecialsWrittenLiterallyAreMatchedAndCanBeSkipped) {
  const Ids ids = golden().encode("<｜User｜>hi<｜Assistant｜>yo<｜end▁of▁sentence｜>", true);
  EXPECT_EQ(ids, (Ids{0, 3, 344, 4, 126, 116, 1}));
  EXPECT_EQ(golden().decode(ids, /*skip_special=*/true), "hiyo");
  // An unfinished special is ordinary text.
  for (int32_t id : golden().encode("<｜User", false)) EXPECT_FALSE(golden().is_special(id));
  // Ordinary text never encodes to the noise token.
  for (int32_t id : golden().encode("dspark noise <｜dspark noise｜>", false)) EXPECT_NE(id, 4095);
}

TEST(TokenizerRoundTrip, InvalidUtf8EncodesByteByByteAndDecodesToReplacement) {
  struct Case {
    std::string bytes;
    Ids ids;
    std::string decoded;
  };
  const std::vector<Case> cases = {
      {"a\x80"
       "b",
       {byte_id('a'), byte_id(0x80), byte_id('b')},
       "a\uFFFDb"},
      {"\xE4\xB8", {byte_id(0xE4), byte_id(0xB8)}, "\uFFFD"},  // truncated 中: one maximal subpart
      {"\xC0\xAF", {byte_id(0xC0), byte_id(0xAF)}, "\uFFFD\uFFFD"},  // overlong '/'
      {"\xED\xA0\x80",
       {byte_id(0xED), byte_id(0xA0), byte_id(0x80)},
       "\uFFFD\uFFFD\uFFFD"},  // surrogate
      {" \xFF", {byte_id(' '), byte_id(0xFF)}, " \uFFFD"},
  };
  for (const Case& c : cases) {
    const Ids ids = golden().encode(c.bytes, false);
    EXPECT_EQ(ids, c.ids);
    EXPECT_EQ(golden().decode(ids), c.decoded);
  }
}

TEST(TokenizerRoundTrip, DecodeJoinsBytesAcrossTokensAndSkipsUnknownIds) {
  const Ids zh = {byte_id(0xE4), byte_id(0xB8), byte_id(0xAD)};  // 中 = E4 B8 AD
  EXPECT_EQ(golden().decode(zh), "中");
  EXPECT_EQ(golden().decode(Ids{zh[0], zh[1]}), "\uFFFD");
  EXPECT_EQ(golden().decode(Ids{1470, 99999, -5, 1470}), " time time");
}

TEST(TokenizerRoundTrip, EncodesTheSameFromManyThreads) {
  const std::string text = "The same words, the same words again; and again the same words.";
  const Ids expected = golden().encode(text, true);
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) got[i] = golden().encode(text, true);
    });
  }
  for (auto& th : threads) th.join();
  for (const Ids& g : got) EXPECT_EQ(g, expected);
}

// ---- pieces: GPT-2 split, byte-level map, lossy UTF-8 ----------------------------------

TEST(Gpt2Split, MatchesHandWorkedPieces) {
  using Pieces = std::vector<std::string_view>;
  const std::vector<std::pair<std::string, Pieces>> cases = {
      {"", {}},
      {"Hello world's  123!", {"Hello", " world", "'s", " ", " 123", "!"}},
      {"I'm", {"I", "'m"}},
      {"DON'T don't", {"DON", "'", "T", " don", "'t"}},  // contractions are case-sensitive
      {"'ll've", {"'ll", "'ve"}},
      {"''s", {"''", "s"}},  // the punctuation run takes the first quote's contraction
      {"  a", {" ", " a"}},  // the last space leads the word
      {"a  ", {"a", "  "}},  // trailing spaces stay together
      {"x\t\ny", {"x", "\t", "\n", "y"}},  // only ' ' joins a word
      {"a\r\n\r\nb", {"a", "\r\n\r", "\n", "b"}},
      {"  \n  x", {"  \n ", " x"}},
      {"über 42ß", {"über", " 42", "ß"}},
      {"中文 🎉!", {"中文", " 🎉!"}},        // emoji and '!' are both "other"
      {"a\u00A0b", {"a", "\u00A0", "b"}},  // NBSP is \s but not ' '
      {"a\u3000\u3000b", {"a", "\u3000", "\u3000", "b"}},
      {"١٢٣Ⅻ", {"١٢٣Ⅻ"}},            // Nd and Nl are both \p{N}
      {"e\u0301", {"e", "\u0301"}},  // a combining mark is not \p{L}
      {"3.14 1,000", {"3", ".", "14", " 1", ",", "000"}},
      {"x ?!", {"x", " ?!"}},
      {"a\x80"
       "b",
       {"a", "\x80", "b"}},  // each invalid byte alone
      {"ab\xE4\xB8", {"ab", "\xE4", "\xB8"}},
      {"!\xC3 ", {"!", "\xC3", " "}},
  };
  for (const auto& [text, pieces] : cases) EXPECT_EQ(gpt2_split(text), pieces) << text;
}

TEST(ByteLevel, MapsEveryByteToADistinctCharacterAndBack) {
  EXPECT_EQ(byte_to_unicode(' '), "Ġ");
  EXPECT_EQ(byte_to_unicode('\n'), "Ċ");
  EXPECT_EQ(byte_to_unicode('A'), "A");
  EXPECT_EQ(byte_to_unicode(0xE9), "é");  // printable Latin-1 stands for itself
  EXPECT_EQ(byte_to_unicode(0xAD), "Ń");  // soft hyphen: the 68th and last shifted byte
  EXPECT_EQ(byte_to_unicode(0x00), "Ā");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string spelled, back;
  append_byte_level(spelled, all);
  ASSERT_TRUE(append_byte_level_decoded(back, spelled));
  EXPECT_EQ(back, all);
  std::string out = "keep";
  EXPECT_FALSE(append_byte_level_decoded(out, "a｜b"));  // '｜' spells no byte
  EXPECT_EQ(out, "keep");
}

TEST(Utf8Lossy, ReplacesEachMaximalIllFormedSubpart) {
  // Expected strings agree with Python's bytes.decode("utf-8", "replace").
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain ascii", "plain ascii"},
      {"\xF0\x9F\x8E\x89", "🎉"},
      {"\xE4\xB8", "\uFFFD"},
      {"\xE4\xB8"
       "a",
       "\uFFFD"
       "a"},
      {"\xC0\xAF", "\uFFFD\uFFFD"},
      {"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
      {"\xF0\x9F\x8E", "\uFFFD"},
      {"\xF5", "\uFFFD"},
      {"\xFF\xFE", "\uFFFD\uFFFD"},
      {"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
      {"\xE0\x80\xAF", "\uFFFD\uFFFD\uFFFD"},
      {"\xC3", "\uFFFD"},
  };
  for (const auto& [bytes, text] : cases) EXPECT_EQ(utf8_lossy(bytes), text);
}

// ---- hand-built files: BPE rank rules, pre-tokenizer forms, added tokens ---------------

json added_token(int32_t id, std::string_view content, bool special = true) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

json byte_level_pre_tokenizer(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Sequence[Split(regex), ByteLevel(use_regex false)], the other form MODEL.md §11 names.
json split_then_byte_level(const char* regex) {
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", regex}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return {{"type", "Sequence"},
          {"pretokenizers", json::array({split, byte_level_pre_tokenizer(false)})}};
}

// Byte b has id b; these extra tokens follow from id 256; bos and eos are 1000 and 1001.
const std::vector<std::string> kExtra = {"ab", "bc", "aa", "aaaa", "abc", "aĠ"};
enum : int32_t { kAB = 256, kBC, kAA, kAAAA, kABC, kAspace };

json hand_built(json merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_to_unicode(static_cast<uint8_t>(b))] = b;
  for (size_t i = 0; i < kExtra.size(); ++i) vocab[kExtra[i]] = 256 + static_cast<int32_t>(i);
  return {
      {"version", "1.0"},
      {"added_tokens", json::array({added_token(1000, kBosToken), added_token(1001, kEosToken)})},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level_pre_tokenizer(true)},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

Ids encode_with(const json& file, std::string_view text) {
  return Tokenizer::from_json(file.dump()).encode(text, false);
}

TEST(TokenizerBpe, MergesByRankLeftmostFirst) {
  struct Case {
    json merges;
    std::string text;
    Ids ids;
  };
  const std::vector<Case> cases = {
      {json::array(), "abc", {'a', 'b', 'c'}},
      {{"b c", "a b"}, "abc", {'a', kBC}},
      {{"a b", "b c"}, "abc", {kAB, 'c'}},
      {{"b c", "a b", "b c"}, "abc", {'a', kBC}},  // a pair listed twice keeps its first rank
      {json::array({{"a", "b"}, {"b", "c"}}), "abc", {kAB, 'c'}},  // [a, b] pairs
      {{"a a"}, "aaa", {kAA, 'a'}},                                // equal ranks: leftmost first
      {{"a a", "aa aa"}, "aaaaa", {kAAAA, 'a'}},
      {{"a a", "aa aa"}, "aaa aaaa", {kAA, 'a', ' ', kAAAA}},
      {{"a b", "ab c"}, "abcabc", {kABC, kABC}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(encode_with(hand_built(c.merges), c.text), c.ids) << c.merges.dump() << " " << c.text;
  }
}

TEST(TokenizerBpe, PreTokenizerForms) {
  json file = hand_built({"a Ġ"});
  EXPECT_EQ(encode_with(file, "a b"), (Ids{'a', ' ', 'b'}));  // the split keeps "a" and " b" apart
  file["pre_tokenizer"] = byte_level_pre_tokenizer(false);
  EXPECT_EQ(encode_with(file, "a b"), (Ids{kAspace, 'b'}));  // no split: one word
  file["pre_tokenizer"] = split_then_byte_level(kGpt2Regex);
  EXPECT_EQ(encode_with(file, "a b"), (Ids{'a', ' ', 'b'}));
}

TEST(TokenizerBpe, IgnoreMergesTakesAVocabWordWhole) {
  json file = hand_built(json::array());
  EXPECT_EQ(encode_with(file, "abc"), (Ids{'a', 'b', 'c'}));
  file["model"]["ignore_merges"] = true;
  EXPECT_EQ(encode_with(file, "abc"), (Ids{kABC}));
}

TEST(TokenizerBpe, AddedTokensMatchLongestFirst) {
  json file = hand_built(json::array());
  file["added_tokens"].push_back(added_token(1002, "<a>", false));
  file["added_tokens"].push_back(added_token(1003, "<a>b", false));
  const Tokenizer t = Tokenizer::from_json(file.dump());
  EXPECT_EQ(t.encode("<a>bc<a>", true), (Ids{1000, 1003, 'c', 1002}));
  EXPECT_EQ(t.encode("x<a", false), (Ids{'x', '<', 'a'}));
  // Only special tokens are skipped; a non-special added token is text.
  EXPECT_EQ(t.decode(Ids{1000, 1003, 'c', 1001}, /*skip_special=*/true), "<a>bc");
  EXPECT_EQ(t.vocab_size(), 1004);
  EXPECT_EQ(t.specials().user, -1);  // this file has none
}

// ---- bad files ------------------------------------------------------------------------

TEST(TokenizerBadFile, RejectedWithAClearMessage) {
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
    std::string text;  // used instead of the mutated file when set
    const char* message;
  };
  const std::vector<Case> cases = {
      {"not json", nullptr, "{ not json", "not valid JSON"},
      {"not an object", nullptr, "[1, 2]", "top level"},
      {"no model", [](json& j) { j.erase("model"); }, "", "model is missing"},
      {"model type", [](json& j) { j["model"]["type"] = "WordPiece"; }, "",
       "unsupported model.type"},
      {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "", "model.vocab is missing"},
      {"no merges", [](json& j) { j["model"].erase("merges"); }, "", "model.merges is missing"},
      {"unknown merge token", [](json& j) { j["model"]["merges"] = {"a zz"}; }, "",
       "unknown token 'zz'"},
      {"merged not in vocab", [](json& j) { j["model"]["merges"] = {"x y"}; }, "",
       "unknown token 'xy'"},
      {"merge shape", [](json& j) { j["model"]["merges"] = {"abc"}; }, "", "is not two tokens"},
      {"merge type", [](json& j) { j["model"]["merges"] = {7}; }, "", "is not two tokens"},
      {"pre_tokenizer type",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "", "unsupported pre_tokenizer"},
      {"no pre_tokenizer", [](json& j) { j["pre_tokenizer"] = nullptr; }, "",
       "pre_tokenizer is missing"},
      {"prefix space", [](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }, "",
       "add_prefix_space"},
      {"other split regex",
       [](json& j) { j["pre_tokenizer"] = split_then_byte_level("\\p{N}{1,3}"); }, "",
       "must use the GPT-2, LLaMA-3 or Qwen2 regex"},
      {"normalizer",
       [](json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       },
       "", "normalizer"},
      {"missing byte", [](json& j) { j["model"]["vocab"].erase("Ā"); }, "",
       "byte-level token of byte 0"},
      {"no bos", [](json& j) { j["added_tokens"].erase(0); }, "", "no bos token"},
      {"negative id", [](json& j) { j["model"]["vocab"]["zz"] = -1; }, "", "out of range"},
      {"shared id", [](json& j) { j["model"]["vocab"]["zz"] = 5; }, "", "gives id 5"},
      {"vocab id type", [](json& j) { j["model"]["vocab"]["zz"] = "5"; }, "", "not an integer id"},
      {"lstrip", [](json& j) { j["added_tokens"][1]["lstrip"] = true; }, "", "lstrip"},
      {"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, "", "byte_fallback"},
      {"field type", [](json& j) { j["pre_tokenizer"]["type"] = 3; }, "", "pre_tokenizer.type"},
  };
  for (const Case& c : cases) {
    std::string text = c.text;
    if (c.mutate) {
      json file = hand_built({"a b"});
      c.mutate(file);
      text = file.dump();
    }
    try {
      Tokenizer::from_json(text);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad tokenizer.json"), std::string::npos) << c.name;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
          << c.name << ": " << e.what();
    }
  }
}

TEST(TokenizerBadFile, LoadNamesThePath) {
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), Error);
  const std::string path = testing::TempDir() + "/troupe-bad-tokenizer.json";
  std::ofstream(path) << "{}";
  try {
    Tokenizer::load(path);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::model
