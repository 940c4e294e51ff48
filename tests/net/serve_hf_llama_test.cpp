// `troupe serve DIR` on a Hugging Face LLaMA-family folder (issue 15): a Qwen2 folder the
// test writes (support/hf_llama_dir.h: config.json with tie_word_embeddings true and no
// lm_head.weight, model.safetensors, a byte-level BPE tokenizer.json and a
// tokenizer_config.json with a ChatML template). A text completion is encoded with the
// folder's tokenizer.json and gets LlamaForward's greedy tokens and their text; chat is
// rendered in ChatML, written out here by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "net/http_test_client.h"
#include "support/hf_llama_dir.h"
#include "support/llama_greedy.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string& folder() {
  static const std::string dir = [] {
    static test::TempDir* tmp = new test::TempDir;  // lives as long as the suite's daemon
    TinyLlamaSpec s;
    s.arch = model::LlamaArch::Qwen2, s.type = model::GgmlType::F32, s.tied = true;
    s.seed = 71, s.vocab = 272, s.context = 128;  // the tokenizer's 262 ids, HF-style padding
    const RefLlama ref = write_tiny_llama(s, tmp->file("m.gguf"));
    const std::string hf = tmp->file("qwen2-hf");
    std::filesystem::create_directory(hf);
    write_hf_llama_dir(ref, {s.arch, model::DType::F32, /*tied=*/true, s.context, 0}, hf);
    return hf;
  }();
  return dir;
}

class ServeHfLlama : public DaemonSuite<ServeHfLlama> {
 public:
  static std::vector<std::string> daemon_args() {
    return {folder(), "--port", "0", "--tcp-port", "0", "--max-num-batched-tokens", "16"};
  }

 protected:
  static json completion(const std::string& path, json body) {
    body["temperature"] = 0, body["ignore_eos"] = true, body["return_token_ids"] = true;
    const HttpResponse r = post(path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json::object();
  }
};

TEST_F(ServeHfLlama, TextCompletionsUseTheFoldersTokenizerAndGetTheForwardsTokens) {
  const auto m = model::LlamaModel::load(folder(), /*need_tokenizer=*/true);
  EXPECT_TRUE(m->weights.tied_output());
  const std::string prompt = "abc cab bca ab";
  const std::vector<int32_t> ids = m->tokenizer->encode(prompt, m->tokenizer->adds_bos());
  const std::vector<int32_t> want = llama_greedy(folder(), ids, 10);
  for (int round = 0; round < 2; ++round) {  // the second one hits the prefix cache
    const json r = completion("/v1/completions", {{"prompt", prompt}, {"max_tokens", 10}});
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
    EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want) << "round " << round;
    EXPECT_EQ(r["choices"][0]["text"], m->tokenizer->decode(want, /*skip_special=*/true));
  }
}

TEST_F(ServeHfLlama, ChatIsRenderedInChatML) {
  const auto m = model::LlamaModel::load(folder(), /*need_tokenizer=*/true);
  // ChatML by hand (chat_template.h): each message, then the assistant's turn opened.
  const std::string text = "<|im_start|>user\nab c<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int32_t> ids = m->tokenizer->encode(text, /*add_bos=*/false);
  ASSERT_EQ(ids.front(), 259 + 1);  // <|im_start|>: one special token (256 bytes, 3 merges, eos)
  const json r = completion("/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "ab c"}}}}, {"max_tokens", 6}});
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), llama_greedy(folder(), ids, 6));
}

}  // namespace
}  // namespace troupe::testing
