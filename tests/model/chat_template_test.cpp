// Chat template (MODEL.md §11) against hand-written prompts.
#include "model/chat_template.h"

#include <gtest/gtest.h>

#include "kernels/check.h"
#include "model/tokenizer.h"

namespace troupe::model {
namespace {

const std::string B = "<｜begin▁of▁sentence｜>";
const std::string E = "<｜end▁of▁sentence｜>";
const std::string U = "<｜User｜>";
const std::string A = "<｜Assistant｜>";

TEST(ChatTemplate, RendersHandWrittenPrompts) {
  struct Case {
    const char* name;
    std::vector<ChatMessage> messages;
    bool add_generation_prompt;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"empty", {}, false, B},
      {"empty, generation", {}, true, B + A},
      {"one user turn", {{"user", "Hi"}}, true, B + U + "Hi" + A},
      {"no generation prompt", {{"user", "Hi"}}, false, B + U + "Hi"},
      {"system first",
       {{"system", "Be brief."}, {"user", "Hi"}},
       true,
       B + "Be brief." + U + "Hi" + A},
      {"multi-turn",
       {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}},
       true,
       B + U + "Hi" + A + "Hello!" + E + U + "2+2?" + A},
      {"systems joined wherever they appear",
       {{"system", "S1"}, {"user", "u1"}, {"system", "S2"}, {"assistant", "a1"}},
       false,
       B + "S1\n\nS2" + U + "u1" + A + "a1" + E},
      {"empty system content still joins", {{"system", ""}, {"system", "S"}}, false, B + "\n\nS"},
      {"empty contents", {{"user", ""}, {"assistant", ""}}, true, B + U + A + E + A},
      {"multi-line content kept verbatim", {{"user", "a\n\nb "}}, false, B + U + "a\n\nb "},
  };
  for (const Case& c : cases)
    EXPECT_EQ(render_chat(c.messages, c.add_generation_prompt), c.expected) << c.name;
}

TEST(ChatTemplate, RejectsOtherRoles) {
  for (const char* role : {"tool", "function", "User", "", "developer"}) {
    try {
      render_chat({{"user", "Hi"}, {role, "x"}}, true);
      ADD_FAILURE() << "accepted role '" << role << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + role + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ChatTemplate, EncodesWithSpecialsAsSingleTokens) {
  const Tokenizer t =
      Tokenizer::load(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7/tokenizer.json");
  const std::string prompt =
      render_chat({{"user", "hi"}, {"assistant", "yo"}, {"user", "hi"}}, true);
  // bos, User, "hi" (344), Assistant, "yo" (126 116), eos, User, "hi", Assistant
  EXPECT_EQ(t.encode(prompt, /*add_bos=*/false),
            (std::vector<int32_t>{0, 3, 344, 4, 126, 116, 1, 3, 344, 4}));
}

}  // namespace
}  // namespace troupe::model
