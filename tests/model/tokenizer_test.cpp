// Tokenizer: the golden tiny tokenizer's encodings, the GPT-2 split against hand-worked
// pieces, BPE rank rules on hand-built files, round trips, invalid UTF-8 and bad files.
#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/gpt2_split.h"
#include "model/utf8.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;

const std::string kGolden = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

const Tokenizer& golden() {
  static const Tokenizer t = Tokenizer::load(kGolden + "/tokenizer.json");
  return t;
}

TEST(TokenizerGolden, EncodesThePromptOfGenerateText) {
  const json g = read_json(kGolden + "/generate-text.json");
  const std::string prompt_text = g["prompt_text"];
  const std::string text = prompt_text.substr(kBosToken.size());  // "Once upon a time"
  ASSERT_EQ(text, "Once upon a time");
  EXPECT_EQ(golden().encode(text, /*add_bos=*/true), g["prompt"].get<std::vector<int32_t>>());
  // bos written literally is the special token, so the whole prompt text encodes the same.
  EXPECT_EQ(golden().encode(prompt_text, false), g["prompt"].get<std::vector<int32_t>>());
}

TEST(TokenizerGolden, DecodesGeneratedText) {
  const json g = read_json(kGolden + "/generate-text.json");
  const auto generated = g["generated"].get<std::vector<int32_t>>();
  EXPECT_EQ(golden().decode(generated), g["generated_text"].get<std::string>());
  EXPECT_EQ(golden().decode(g["prompt"].get<std::vector<int32_t>>()), g["prompt_text"].get<std::string>());
}

}  // namespace
}  // namespace troupe::model
