// The pre-tokenizer splits (model/pre_split.h): hand-worked pieces, and random ASCII
// texts against std::regex running each split's regex with \p{L}, \p{N} and \s spelled
// as their ASCII members (ECMAScript alternation, like Oniguruma's, takes the first
// alternative that matches, with backtracking inside it, so on ASCII they must agree).
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "model/pre_split.h"

namespace troupe::model {
namespace {

using Pieces = std::vector<std::string_view>;

const char* const kGpt2Ascii =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+)";
const char* const kLlama3Ascii =
    R"('[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Ascii =
    R"('[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> regex_pieces(const std::regex& re, const std::string& text) {
  std::vector<std::string> out;
  auto pos = text.cbegin();
  while (pos != text.cend()) {
    std::smatch m;
    const bool found = std::regex_search(pos, text.cend(), m, re, std::regex_constants::match_continuous);
    if (!found || m.length(0) == 0) return {"<no match at " + std::to_string(pos - text.cbegin()) + ">"};
    out.push_back(m.str(0));
    pos += m.length(0);
  }
  return out;
}

std::vector<std::string> strings(const Pieces& p) { return {p.begin(), p.end()}; }

TEST(PreSplit, Llama3MatchesHandWorkedPieces) {
  const std::vector<std::pair<std::string, Pieces>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"I'M here, they'Re", {"I", "'M", " here", ",", " they", "'Re"}},
      {"12345 apples", {"123", "45", " apples"}},
      {"(hello)", {"(hello", ")"}},
      {"((hi", {"((", "hi"}},
      {"a  b", {"a", " ", " b"}},
      {"a\n\nb", {"a", "\n\n", "b"}},
      {"x \n  y", {"x", " \n", " ", " y"}},
      {"end.\n\n", {"end", ".\n\n"}},
      {"tab\tthen", {"tab", "\tthen"}},
      {"  1", {" ", " ", "1"}},
      {"trailing   ", {"trailing", "   "}},
      {"\xC3\xA9t\xC3\xA9 42", {"\xC3\xA9t\xC3\xA9", " ", "42"}},  // été: letters
      {"a\xFF" "b", {"a", "\xFF", "b"}},                              // an ill-formed byte alone
  };
  for (const auto& [text, pieces] : cases) EXPECT_EQ(llama3_split(text, 3), pieces) << text;
  EXPECT_EQ(llama3_split("12345", 1), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pre_split(PreSplit::None, "a b"), (Pieces{"a b"}));
  EXPECT_TRUE(pre_split(PreSplit::None, "").empty());
}

TEST(PreSplit, RandomAsciiTextsMatchTheRegexes) {
  const std::regex gpt2(kGpt2Ascii), llama3(kLlama3Ascii), qwen2(kQwen2Ascii);
  const std::string alphabet = "abSsTtLlEeDdMmRrVv019 \t\n\r'.,!(-";
  std::mt19937 rng(15);
  for (int i = 0; i < 2000; ++i) {
    std::string text(1 + rng() % 24, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    EXPECT_EQ(strings(gpt2_split(text)), regex_pieces(gpt2, text)) << "gpt2: [" << text << "]";
    EXPECT_EQ(strings(llama3_split(text, 3)), regex_pieces(llama3, text)) << "llama3: [" << text << "]";
    EXPECT_EQ(strings(llama3_split(text, 1)), regex_pieces(qwen2, text)) << "qwen2: [" << text << "]";
  }
}

}  // namespace
}  // namespace troupe::model
