// `troupe serve x.gguf` (issue 15): a LLaMA-family GGUF file the test writes, with its
// SentencePiece-style vocabulary, served by the same daemon and engine as V4.1. Completions
// of a text prompt (encoded with the file's tokenizer) and of token ids, greedy and n = 2,
// give the tokens of LlamaForward's own one-sequence run; chat is refused with a reason
// for a file without a chat template, and rendered in the template's family for one with
// (Llama-2's: its "<s>" written in the text is the bos token). A qwen2 file (biases,
// NEOX RoPE) serves the same way.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "net/http_test_client.h"
#include "support/llama_greedy.h"
#include "support/llama_ref.h"

namespace troupe::testing {
namespace {

using nlohmann::json;


// The file the suite serves; with_template: a Llama-2 chat template in its metadata;
// qwen2: a dense `qwen2` file instead of a Mixtral-style one.
std::string write_model(bool with_template, bool qwen2 = false) {
  static test::TempDir* dir = new test::TempDir;  // lives as long as the suites' daemons
  TinyLlamaSpec s;
  s.type = model::GgmlType::Q8_0;
  s.experts = 4, s.top_k = 2, s.seed = 31;
  if (qwen2) s.arch = model::LlamaArch::Qwen2, s.experts = 0, s.top_k = 0, s.seed = 32;
  s.vocab = 3 + 256 + 9;
  s.context = 256;
  s.more_metadata = [with_template](model::GgufWriter& w) {
    add_spm_test_vocabulary(w, abc_pieces());
    if (with_template)
      w.set_string("tokenizer.chat_template",
                   "{% for m in messages %}{{ bos_token + '[INST] ' }}{% if loop.first %}<<SYS>>"
                   "{% endif %}{{ m['content'] + ' [/INST]' }}{% endfor %}");
  };
  const std::string path =
      dir->file(qwen2 ? "tiny-qwen2.gguf" : with_template ? "chat-llama.gguf" : "tiny-llama.gguf");
  write_tiny_llama(s, path);
  return path;
}

const std::string& model_path() {
  static const std::string path = write_model(false);
  return path;
}

const std::string& chat_model_path() {
  static const std::string path = write_model(true);
  return path;
}

const std::string& qwen2_model_path() {
  static const std::string path = write_model(false, true);
  return path;
}

// LlamaForward's greedy tokens after `prompt`, one sequence on its contiguous state.
std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int64_t n,
                               const std::string& path = model_path()) {
  return llama_greedy(path, prompt, n);
}

class ServeGguf : public DaemonSuite<ServeGguf> {
 public:
  static std::vector<std::string> daemon_args() {
    return {model_path(), "--port", "0", "--tcp-port", "0", "--max-num-batched-tokens", "16"};
  }

 protected:
  static json post_json(const std::string& path, const json& body, int status = 200) {
    const HttpResponse r = DaemonSuite::post(path, body.dump());
    EXPECT_EQ(r.status, status) << r.body;
    return json::parse(r.body);
  }
};

TEST_F(ServeGguf, TextCompletionsAreTheForwardsGreedyTokens) {
  const auto m = model::LlamaModel::load(model_path(), true);
  const std::string prompt = "ab cab abc bca cab ab ab c";
  const std::vector<int32_t> ids = m->tokenizer->encode(prompt, m->tokenizer->adds_bos());
  const json r = post_json("/v1/completions", {{"prompt", prompt}, {"max_tokens", 10},
                                               {"temperature", 0}, {"ignore_eos", true},
                                               {"n", 2}, {"return_token_ids", true}});
  ASSERT_EQ(r["choices"].size(), 2u);
  const std::vector<int32_t> want = reference(ids, 10);
  for (const json& c : r["choices"]) {
    EXPECT_EQ(c["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
    EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), want);
    EXPECT_EQ(c["text"], m->tokenizer->decode(want, /*skip_special=*/true));
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], int64_t(ids.size()));
}

TEST_F(ServeGguf, TokenIdPromptsAndPrefixHitsGiveTheSameTokens) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 265);
  const std::vector<int32_t> want = reference(prompt, 8);
  for (int round = 0; round < 2; ++round) {  // the second one hits the prefix cache
    const json r = post_json("/v1/completions", {{"prompt", prompt}, {"max_tokens", 8},
                                                 {"temperature", 0}, {"ignore_eos", true},
                                                 {"return_token_ids", true}});
    EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want) << "round " << round;
  }
}

TEST_F(ServeGguf, ChatWithoutATemplateIsA400) {
  const json r = post_json("/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "ab"}}}}}, 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("chat template"), std::string::npos);
}

class ServeGgufChat : public DaemonSuite<ServeGgufChat> {
 public:
  static std::vector<std::string> daemon_args() {
    return {chat_model_path(), "--port", "0", "--tcp-port", "0"};
  }
};

TEST_F(ServeGgufChat, ChatIsRenderedInTheFilesTemplateFamily) {
  const auto m = model::LlamaModel::load(chat_model_path(), true);
  ASSERT_EQ(m->tokenizer->chat_format(), model::ChatFormat::Llama2);
  // Written out by hand (Llama-2's format, chat_template.h): bos as "<s>", the system text
  // inside <<SYS>> in the first user turn.
  const std::string text = "<s>[INST] <<SYS>>\nbe brief\n<</SYS>>\n\nab cab [/INST]";
  const std::vector<int32_t> ids = m->tokenizer->encode(text, /*add_bos=*/false);
  ASSERT_EQ(ids.front(), 1);  // "<s>" is the bos token, not its three characters
  const HttpResponse r = post("/v1/chat/completions",
                              json{{"messages", {{{"role", "system"}, {"content", "be brief"}},
                                                 {{"role", "user"}, {"content", "ab cab"}}}},
                                   {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true},
                                   {"return_token_ids", true}}
                                  .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["prompt_token_ids"].get<std::vector<int32_t>>(), ids);  // chat: at the top level
  EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<int32_t>>(), reference(ids, 6));
  EXPECT_EQ(body["usage"]["prompt_tokens"], int64_t(ids.size()));
}

class ServeGgufQwen2 : public DaemonSuite<ServeGgufQwen2> {
 public:
  static std::vector<std::string> daemon_args() {
    return {qwen2_model_path(), "--port", "0", "--tcp-port", "0", "--max-num-batched-tokens", "16"};
  }
};

TEST_F(ServeGgufQwen2, CompletionsAreTheForwardsGreedyTokens) {
  const auto m = model::LlamaModel::load(qwen2_model_path(), true);
  ASSERT_EQ(m->config.arch, model::LlamaArch::Qwen2);
  const std::string prompt = "cab abc ab bc ca";
  const std::vector<int32_t> ids = m->tokenizer->encode(prompt, m->tokenizer->adds_bos());
  for (int round = 0; round < 2; ++round) {  // the second one hits the prefix cache
    const HttpResponse r = post("/v1/completions",
                                json{{"prompt", prompt}, {"max_tokens", 10}, {"temperature", 0},
                                     {"ignore_eos", true}, {"return_token_ids", true}}
                                    .dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>(), ids);
    EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              reference(ids, 10, qwen2_model_path()))
        << "round " << round;
  }
}

}  // namespace
}  // namespace troupe::testing
