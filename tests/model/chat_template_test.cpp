// Chat template (MODEL.md §11) against hand-written prompts.
#include "model/chat_template.h"

#include <gtest/gtest.h>

#include "kernels/check.h"
#include "model/tokenizer.h"
#include "support/test_paths.h"

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

namespace troupe::model {
namespace {

// The GGUF families, each against its public format written out by hand.
TEST(ChatFormats, RenderTheirPublicFormats) {
  const ChatSpecials s{"<BOS>", "<EOS>"};
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello! "}, {"user", "2+2?"}};
  EXPECT_EQ(render_chat(ChatFormat::ChatML, s, chat, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
            "<|im_start|>assistant\nHello! <|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFormat::Llama3, s, chat, true),
            "<BOS><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatFormat::Llama3, s, {{"user", "x"}}, false),
            "<BOS><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
  EXPECT_EQ(render_chat(ChatFormat::Llama2, s, chat, true),
            "<BOS>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! <EOS><BOS>[INST] 2+2? [/INST]");
  EXPECT_EQ(render_chat(ChatFormat::Mistral, s, chat, true),
            "<BOS>[INST] Be brief.\n\n Hi  [/INST]Hello! <EOS>[INST] 2+2? [/INST]");
  EXPECT_EQ(render_chat(ChatFormat::DeepSeekV3, s, {{"user", "u"}}, true),
            "<BOS>" + std::string(kUserToken) + "u" + std::string(kAssistantToken));
}

TEST(ChatFormats, DetectsTheFamilyOfAJinjaTemplate) {
  EXPECT_EQ(detect_chat_format("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}"),
            ChatFormat::ChatML);
  EXPECT_EQ(detect_chat_format("{{ bos_token }}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"),
            ChatFormat::Llama3);
  EXPECT_EQ(detect_chat_format("{{ bos_token + '[INST] ' + '<<SYS>>\\n' }}"), ChatFormat::Llama2);
  EXPECT_EQ(detect_chat_format("{{ bos_token }}{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatFormat::Mistral);
  EXPECT_EQ(detect_chat_format("{{'<｜User｜>' + content}}{{'<｜Assistant｜>'}}"), ChatFormat::DeepSeekV3);
  EXPECT_EQ(detect_chat_format("{{ messages }}"), ChatFormat::None);
  EXPECT_EQ(detect_chat_format(""), ChatFormat::None);
}

TEST(ChatFormats, NoTemplateIsAClearErrorAndRolesAreChecked) {
  try {
    render_chat(ChatFormat::None, {}, {{"user", "x"}}, true);
    ADD_FAILURE() << "rendered without a template";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  for (ChatFormat f : {ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Llama2, ChatFormat::Mistral})
    EXPECT_THROW(render_chat(f, {}, {{"tool", "x"}}, true), Error) << chat_format_name(f);
}

}  // namespace
}  // namespace troupe::model
