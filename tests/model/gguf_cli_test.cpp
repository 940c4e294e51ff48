// `troupe logits` and `troupe generate` on a .gguf file the test writes: the logits are the
// reference's, generate prints the reference's greedy ids, bad files exit 2 with a message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/llama_ref.h"
#include "support/run_troupe.h"

namespace troupe::model {
namespace {

using testing::run_troupe;

TEST(GgufCli, LogitsOfEveryPositionMatchTheReference) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.type = GgmlType::Q8_0;
  const auto ref = testing::write_tiny_llama(s, dir.file("m.gguf"));
  const auto r = run_troupe("logits --model " + dir.file("m.gguf") + " --all-positions --tokens 1,2,3,70");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), (std::vector<int32_t>{1, 2, 3, 70}));
  const auto rows = j["logits"].get<std::vector<std::vector<double>>>();
  const auto want = testing::ref_llama_logits(ref, {1, 2, 3, 70});
  ASSERT_EQ(rows.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(rows[t].size(), size_t(ref.V));
    for (int64_t v = 0; v < ref.V; ++v) EXPECT_NEAR(rows[t][v], want[t][v], 1e-3) << t << "," << v;
  }
}

TEST(GgufCli, GenerateGreedyPrintsTheReferenceTokens) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.type = GgmlType::F16;
  s.experts = 4;
  s.top_k = 2;
  const auto ref = testing::write_tiny_llama(s, dir.file("moe.gguf"));
  const auto r = run_troupe("generate --model " + dir.file("moe.gguf") +
                            " --tokens 1,5,9 --max-tokens 6 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<int32_t> seq{1, 5, 9};
  std::string want;
  for (int i = 0; i < 6; ++i) {
    const auto logits = testing::ref_llama_logits(ref, seq).back();
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    want += (i ? "," : "") + std::to_string(next);
    seq.push_back(next);
  }
  EXPECT_EQ(r.out, want + "\n");
}

// --prompt through the file's own vocabulary (3 specials, 256 byte tokens, a few pieces):
// the text is the decoded reference greedy tokens.
TEST(GgufCli, GeneratePromptStreamsTheReferenceText) {
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.vocab = 3 + 256 + int64_t(testing::abc_pieces().size());
  s.more_metadata = [](GgufWriter& w) { testing::add_spm_test_vocabulary(w, testing::abc_pieces()); };
  const auto ref = testing::write_tiny_llama(s, dir.file("spm.gguf"));
  const auto r = run_troupe("generate --model " + dir.file("spm.gguf") + " --prompt 'ab cab' --max-tokens 8 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto m = LlamaModel::load(dir.file("spm.gguf"), true);
  std::vector<int32_t> seq = m->tokenizer->encode("ab cab", true);
  ASSERT_GE(seq.size(), 3u);
  EXPECT_EQ(seq[0], 1);
  std::vector<int32_t> out;
  for (int i = 0; i < 8; ++i) {
    const auto logits = testing::ref_llama_logits(ref, seq).back();
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    seq.push_back(next);
  }
  EXPECT_EQ(r.out, m->tokenizer->decode(out, /*skip_special=*/true) + "\n");
}

TEST(GgufCli, BadFilesAndFlagsExit2WithAMessage) {
  test::TempDir dir;
  testing::write_tiny_llama({}, dir.file("m.gguf"));
  {  // a truncated copy
    std::ifstream in(dir.file("m.gguf"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(dir.file("cut.gguf"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    std::ofstream(dir.file("text.gguf")) << "not a gguf file at all";
  }
  testing::expect_usage_errors({
      {"logits --model " + dir.file("cut.gguf") + " --tokens 1", "truncated"},
      {"logits --model " + dir.file("text.gguf") + " --tokens 1", "not a GGUF file"},
      {"logits --model " + dir.file("absent.gguf") + " --tokens 1", "cannot open"},
      {"logits --model " + dir.file("m.gguf") + " --tokens 1,80", "outside the vocabulary"},
      {"logits --model " + dir.file("m.gguf") + " --tokens 1 --replay", "--replay"},
      {"generate --model " + dir.file("m.gguf") + " --prompt hi", "has no tokenizer"},
      {"generate --model " + dir.file("m.gguf"), "give one of --prompt TEXT or --tokens"},
      {"generate --tokens 1,2", "--tokens is for LLaMA-family models"},
      {"logits --model " + dir.file("m.gguf") + " --tokens 1 --expert-precision int8", "is a LLaMA-family model"},
  });
}

}  // namespace
}  // namespace troupe::model
