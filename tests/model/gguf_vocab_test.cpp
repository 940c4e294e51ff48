// Tokenizer::from_gguf: a GPT-2 BPE vocabulary written into a GGUF file encodes exactly as
// the same vocabulary written as an HF tokenizer.json (the reader checked against the
// golden tokenizer), for each pre-tokenizer split; control and user-defined tokens are
// matched literally; a SentencePiece-style vocabulary matches its control tokens literally
// too, with llama.cpp's space prefix after each; the chat template's family is read.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/pre_split.h"
#include "model/tokenizer.h"
#include "temp_dir.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// Byte b has id b; then merged tokens; then the control and user-defined tokens.
struct Bpe {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // GGUF token types: 1 normal, 3 control, 4 user-defined
  std::vector<std::string> merges;
};

Bpe small_bpe() {
  Bpe v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
    v.types.push_back(1);
  }
  const std::string G = byte_to_unicode(' ');
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {G, "w"}, {G + "w", "o"}, {"r", "l"},
           {G + "wo", "rl"}, {G + "worl", "d"}, {"1", "2"}, {"12", "3"}, {"'", "s"}, {G, G},
           {byte_to_unicode('\n'), byte_to_unicode('\n')}, {G, "h"}}) {
    v.merges.push_back(l + " " + r);
    v.tokens.push_back(l + r);
    v.types.push_back(1);
  }
  for (const auto& [t, type] : std::vector<std::pair<std::string, int32_t>>{
           {std::string(kBosToken), 3}, {std::string(kEosToken), 3}, {"<|eot_id|>", 3}, {"<tool>", 4},
           {"<|begin_of_text|>", 3}}) {
    v.tokens.push_back(t);
    v.types.push_back(type);
  }
  return v;
}

int32_t id_of(const Bpe& v, const std::string& t) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == t) return static_cast<int32_t>(i);
  return -1;
}

std::vector<uint8_t> gguf_bytes(const Bpe& v, const std::string& pre, const std::string& chat_template = "",
                                bool add_bos = true) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", v.tokens);
  w.set_i32s("tokenizer.ggml.token_type", v.types);
  w.set_strings("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id_of(v, std::string(kBosToken))));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id_of(v, std::string(kEosToken))));
  w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(id_of(v, "<|eot_id|>")));
  w.set_bool("tokenizer.ggml.add_bos_token", add_bos);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  return w.bytes();
}

std::string json_text(const Bpe& v, std::string_view regex, const json& post_processor = nullptr) {
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == 1) {
      vocab[v.tokens[i]] = i;
    } else {
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", v.types[i] == 3}});
    }
  }
  const json split = {{"type", "Split"}, {"pattern", {{"Regex", std::string(regex)}}},
                      {"behavior", "Isolated"}, {"invert", false}};
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  return json{{"added_tokens", added},
              {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
              {"post_processor", post_processor},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", v.merges}}}}
      .dump();
}

std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> parts = {"h", "e", "l", "o", "w", "r", "d", "1", "2", "3", "'", "s",
                                                 "S", " ", "  ", "\n", "\t", "!", "\xC3\xA9", "hello",
                                                 " world", "<tool>", "<|eot_id|>", "\xFF"};
  std::string text;
  for (int n = 1 + rng() % 12; n > 0; --n) text += parts[rng() % parts.size()];
  return text;
}

TEST(GgufVocab, Gpt2BpeEncodesAsTheSameTokenizerJson) {
  const Bpe v = small_bpe();
  for (const auto& [pre, regex] : std::vector<std::pair<std::string, std::string_view>>{
           {"gpt2", kGpt2SplitRegex}, {"llama-bpe", kLlama3SplitRegex}, {"qwen2", kQwen2SplitRegex}}) {
    const auto bytes = gguf_bytes(v, pre);
    const Tokenizer g = Tokenizer::from_gguf(GgufFile::parse(bytes, "v.gguf"));
    const Tokenizer j = Tokenizer::from_json(json_text(v, regex));
    std::mt19937 rng(7);
    for (int i = 0; i < 500; ++i) {
      const std::string text = random_text(rng);
      ASSERT_EQ(g.encode(text, false), j.encode(text, false)) << pre << ": [" << text << "]";
      ASSERT_EQ(g.decode(g.encode(text, false)), j.decode(j.encode(text, false))) << pre;
    }
  }
}

TEST(GgufVocab, Gpt2BpeHandWorked) {
  const Bpe v = small_bpe();
  const auto bytes = gguf_bytes(v, "llama-bpe", "{{ '<|start_header_id|>' }}...<|end_header_id|>");
  const Tokenizer t = Tokenizer::from_gguf(GgufFile::parse(bytes, "v.gguf"));
  const int32_t bos = id_of(v, std::string(kBosToken)), eot = id_of(v, "<|eot_id|>");
  const int32_t hello = id_of(v, "hello"), world = id_of(v, byte_to_unicode(' ') + "world");
  EXPECT_EQ(t.encode("hello world", true), (Ids{bos, hello, world}));
  EXPECT_EQ(t.encode("hello<|eot_id|><tool>", false), (Ids{hello, eot, id_of(v, "<tool>")}));
  EXPECT_EQ(t.encode("12345", false), (Ids{id_of(v, "123"), '4', '5'}));  // digits by three
  EXPECT_EQ(t.decode(Ids{hello, eot, world}, /*skip_special=*/true), "hello world");
  EXPECT_EQ(t.decode(Ids{hello, eot, world}, /*skip_special=*/false), "hello<|eot_id|> world");
  EXPECT_TRUE(t.adds_bos());
  EXPECT_TRUE(t.is_special(eot));
  EXPECT_FALSE(t.is_special(id_of(v, "<tool>")));
  EXPECT_EQ(t.specials().eot, eot);
  EXPECT_EQ(t.specials().bos, bos);
  EXPECT_EQ(t.chat_format(), ChatFormat::Llama3);
  EXPECT_EQ(t.chat_specials().bos, std::string(kBosToken));
  EXPECT_EQ(t.vocab_size(), static_cast<int64_t>(v.tokens.size()));

  const auto no_bos = gguf_bytes(v, "gpt2", "", /*add_bos=*/false);
  const Tokenizer n = Tokenizer::from_gguf(GgufFile::parse(no_bos, "v.gguf"));
  EXPECT_EQ(n.encode("hello", true), (Ids{hello}));  // the file says no bos
  EXPECT_EQ(n.chat_format(), ChatFormat::None);
}

TEST(GgufVocab, BadVocabulariesAreClearErrors) {
  const Bpe v = small_bpe();
  auto error_of = [](const std::vector<uint8_t>& bytes) -> std::string {
    try {
      Tokenizer::from_gguf(GgufFile::parse(bytes, "v.gguf"));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of(gguf_bytes(v, "falcon")).find("tokenizer.ggml.pre 'falcon' is not supported"), std::string::npos);
  Bpe bad_merge = v;
  bad_merge.merges.push_back("zz q");
  EXPECT_NE(error_of(gguf_bytes(bad_merge, "gpt2")).find("refers to unknown token 'zz'"), std::string::npos);
  Bpe no_byte = v;
  no_byte.tokens[65] = "not a byte";
  EXPECT_NE(error_of(gguf_bytes(no_byte, "gpt2")).find("lacks the byte-level token of byte 65"), std::string::npos);
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_strings("tokenizer.ggml.tokens", {"a"});
  EXPECT_NE(error_of(w.bytes()).find("'bert' is not supported"), std::string::npos);
}

// A SentencePiece-style vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3 <tool> (user-defined),
// 4..259 byte tokens, then pieces.
std::vector<uint8_t> spm_bytes(const std::string& chat_template) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<tool>"};
  std::vector<int32_t> types = {2, 3, 3, 4};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& t : {sp, std::string("h"), std::string("i"), sp + "h", sp + "hi", std::string("[")}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  scores[tokens.size() - 2] = 1.0f;  // "▁hi" beats the rest
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  return w.bytes();
}

TEST(GgufVocab, SentencePieceMatchesSpecialsLiterallyWithASpacePrefixAfterEach) {
  const auto bytes = spm_bytes("{% if messages[0]['role'] == 'system' %}<<SYS>>{% endif %}[INST]");
  const GgufFile file = GgufFile::parse(bytes, "s.gguf");
  const Tokenizer t = Tokenizer::from_gguf(file);
  const SpmTokenizer spm = SpmTokenizer::from_gguf(file);
  const int32_t hi = 264;  // "▁hi": 4 specials, 256 bytes, then "▁", "h", "i", "▁h"
  EXPECT_EQ(t.encode("hi", true), (Ids{1, hi}));
  // Each text piece after a matched token gets the prefix, as at the start.
  EXPECT_EQ(t.encode("<s>hi</s>hi", false), (Ids{1, hi, 2, hi}));
  EXPECT_EQ(t.encode("hi<tool>hi", false), (Ids{hi, 3, hi}));
  // Without parse_special a control token's text is only text; user-defined ones always match.
  EXPECT_NE(spm.encode("<s>hi", false), (Ids{1, hi}));
  EXPECT_EQ(spm.encode("<s>hi", false, /*parse_special=*/true), (Ids{1, hi}));
  EXPECT_EQ(spm.encode("hi<tool>", false), (Ids{hi, 3}));
  // The prefix space is dropped only for a text from its start (bos first).
  EXPECT_EQ(t.decode(Ids{1, hi}, true), "hi");
  EXPECT_EQ(t.decode(Ids{hi, hi}, true), " hi hi");
  EXPECT_EQ(t.decode(Ids{1, hi, 2}, false), "<s> hi</s>");  // kept specials: the space stays (HF, llama.cpp)
  EXPECT_TRUE(t.is_special(1));
  EXPECT_EQ(t.id_to_token(hi), std::optional<std::string_view>("\xE2\x96\x81hi"));
  EXPECT_EQ(t.chat_format(), ChatFormat::Llama2);
  EXPECT_EQ(t.chat_specials().bos, "<s>");
  EXPECT_EQ(t.chat_specials().eos, "</s>");
}

// An HF checkpoint's tokenizer_config.json beside its tokenizer.json (LLaMA-3's form):
// specials by their text, bos from the post-processor's template, the chat family.
TEST(TokenizerConfig, ReadsSpecialsBosAndTheChatTemplateBesideTokenizerJson) {
  const Bpe v = small_bpe();
  const json template_processing = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  const json config = {{"bos_token", "<|begin_of_text|>"},
                       {"eos_token", {{"content", "<|eot_id|>"}, {"special", true}}},
                       {"chat_template", "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}"}};
  const int32_t bos = id_of(v, "<|begin_of_text|>"), eot = id_of(v, "<|eot_id|>"), hello = id_of(v, "hello");

  test::TempDir dir;
  {
    std::ofstream(dir.file("tokenizer.json")) << json_text(v, kLlama3SplitRegex, template_processing);
    std::ofstream(dir.file("tokenizer_config.json")) << config.dump();
  }
  const Tokenizer t = Tokenizer::load(dir.file("tokenizer.json"));
  EXPECT_EQ(t.specials().bos, bos);
  EXPECT_EQ(t.specials().eos, eot);
  EXPECT_TRUE(t.adds_bos());
  EXPECT_EQ(t.encode("hello", true), (Ids{bos, hello}));
  EXPECT_EQ(t.chat_format(), ChatFormat::Llama3);
  EXPECT_EQ(t.chat_specials().bos, "<|begin_of_text|>");

  // No post-processor and no add_bos_token: no bos (Qwen2's form); the key wins over both.
  const Tokenizer plain = Tokenizer::from_json(json_text(v, kQwen2SplitRegex), config.dump());
  EXPECT_FALSE(plain.adds_bos());
  EXPECT_EQ(plain.encode("hello", true), (Ids{hello}));
  json with_key = config;
  with_key["add_bos_token"] = true;
  EXPECT_TRUE(Tokenizer::from_json(json_text(v, kQwen2SplitRegex), with_key.dump()).adds_bos());

  json bad = config;
  bad["eos_token"] = "<nope>";
  try {
    Tokenizer::from_json(json_text(v, kLlama3SplitRegex), bad.dump());
    ADD_FAILURE() << "accepted an eos_token that is not a token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eos_token '<nope>' is not a token"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::from_json(json_text(v, kLlama3SplitRegex), "{not json"), Error);
}

// A V4.1 folder with a tokenizer_config.json (real HF checkpoints have one) keeps MODEL.md
// §11's chat format, named by its template or not.
TEST(TokenizerConfig, AV41FolderKeepsTheDeepSeekChatFormat) {
  std::ifstream in(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7/tokenizer.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json config = {{"bos_token", std::string(kBosToken)}, {"eos_token", std::string(kEosToken)}};
  const Tokenizer plain = Tokenizer::from_json(text, config.dump());
  EXPECT_EQ(plain.chat_format(), ChatFormat::DeepSeekV3);
  EXPECT_EQ(plain.render_chat({{"user", "hi"}}, true), render_chat({{"user", "hi"}}, true));
  config["chat_template"] = "{{ bos_token }}{{'<｜User｜>' + c}}{{'<｜Assistant｜>'}}";
  EXPECT_EQ(Tokenizer::from_json(text, config.dump()).chat_format(), ChatFormat::DeepSeekV3);
}

}  // namespace
}  // namespace troupe::model
