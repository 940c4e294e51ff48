// `troupe bench peer` end to end on the small shapes: --write makes files the LLaMA loader
// opens, --model prints its JSON line with every figure present and positive (no timing
// thresholds), --check-tokens agrees with troupe's own greedy tokens, bad flags are errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/sampling.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

// The number after "key": in a JSON line (the bench prints flat numbers).
double json_number(const std::string& out, const std::string& key) {
  const size_t at = out.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + key.size() + 3));
}

TEST(BenchPeerCli, WritesFilesAndPrintsFigures) {
  test::TempDir dir;
  RunResult r = run_troupe("bench peer --write " + dir.path().string() + " --files dense-small-q8_0,moe-small-q4_0");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* name : {"dense-small-q8_0", "moe-small-q4_0"}) {
    const std::string file = dir.file(std::string(name) + ".gguf");
    const auto m = model::LlamaModel::load(file, /*need_tokenizer=*/true);
    EXPECT_EQ(m->config.vocab_size, 512);
    r = run_troupe("bench peer --model " + file + " --pp 8 --tg 2 --parallel 3 --parallel-steps 2 --repeats 1");
    ASSERT_EQ(r.status, 0) << r.out;
    for (const char* key : {"pp_tok_s", "tg_tok_s", "tok_s", "weight_bytes", "active_bytes_per_token", "flops_per_token"})
      EXPECT_GT(json_number(r.out, key), 0) << key << " in " << r.out;
  }
}

TEST(BenchPeerCli, TeacherForcedCheckAgreesWithOwnGreedyTokens) {
  test::TempDir dir;
  ASSERT_EQ(run_troupe("bench peer --write " + dir.path().string() + " --files dense-small-f16").status, 0);
  const std::string file = dir.file("dense-small-f16.gguf");
  const auto m = model::LlamaModel::load(file);
  std::vector<int32_t> seq{3, 10, 17};
  model::LlamaState s = model::LlamaState::empty(m->config);
  std::vector<float> logits = m->forward->run(s, seq, false);
  for (int i = 0; i < 6; ++i) {
    seq.push_back(kernels::argmax(logits.data(), m->config.vocab_size));
    logits = m->forward->run(s, std::vector<int32_t>{seq.back()}, false);
  }
  std::string ids;
  for (int32_t t : seq) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  RunResult r = run_troupe("bench peer --model " + file + " --check-tokens " + ids + " --prompt-len 3");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(json_number(r.out, "positions"), 6) << r.out;
  EXPECT_EQ(json_number(r.out, "same"), 6) << r.out;
  // Another model's tokens (here: shifted by one) are reported position by position.
  for (size_t i = 3; i < seq.size(); ++i) seq[i] = (seq[i] + 1) % 512;
  ids.clear();
  for (int32_t t : seq) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  r = run_troupe("bench peer --model " + file + " --check-tokens " + ids + " --prompt-len 3");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"position\":2"), std::string::npos) << r.out;
}

TEST(BenchPeerCli, BadFlagsAreErrors) {
  expect_usage_errors({{"bench peer", "--write"},
                       {"bench peer --write /tmp/x --files dense-q5_1", "q5_1"},
                       {"bench peer --write /tmp/x --files huge-f16", "huge"},
                       {"bench peer --model x.gguf --threads 0", "--threads"}});
}

}  // namespace
}  // namespace troupe::testing
