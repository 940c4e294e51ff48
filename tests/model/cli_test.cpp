// The troupe binary end to end: logits prints what Forward computes; generate
// reproduces the golden greedy text; bad input exits non-zero with a clear message.
#include <gtest/gtest.h>

#include <string>

#include "model/row_groups_copy.h"
#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::model {
namespace {

using testing::run_troupe;
using testing::RunResult;

TEST(Cli, LogitsMatchGoldenForEveryPosition) {
  const auto j = testing::read_json(testing::golden_dir() + "/logits-24-all.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  const RunResult r =
      run_troupe("logits --model " + testing::golden_dir() + " --all-positions --tokens " + list);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["tokens"].get<std::vector<int32_t>>(), tokens);
  const auto want = j["logits"].get<std::vector<std::vector<double>>>();
  const auto rows = got["logits"].get<std::vector<std::vector<float>>>();
  ASSERT_EQ(rows.size(), want.size());
  for (size_t p = 0; p < rows.size(); ++p)
    EXPECT_LE(testing::relative_l2(rows[p].data(), want[p]), 1e-2) << p;
}

// --expert-precision int8 reaches the forward: the printed logits are the in-process
// Int8 Forward's (to print precision), not the f32 ones. The in-process weights get the
// experts' row groups as the CLI's loader gives them (where this CPU path reads them):
// without, the int8 GEMMs run the per-block kernels, which are the reference's to 1e-5
// only (AVX2), and a q8 rounding of an activation turned by that changes the logits past
// print precision.
TEST(Cli, LogitsWithInt8ExpertsAreTheInt8Forwards) {
  const std::vector<int32_t> tokens = testing::random_tokens(12, 9);
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  const RunResult r = run_troupe("logits --model " + testing::golden_dir() +
                                 " --expert-precision int8 --tokens " + list);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto row = nlohmann::json::parse(r.out)["logits"][0].get<std::vector<float>>();
  const auto& g = testing::golden_model();
  auto last_logits = [&](kernels::GemmPrecision p) {
    ForwardOptions o;
    o.expert_precision = p;
    ModelWeights w = bind_weights(g.ckpt, g.config);
    if (p == kernels::GemmPrecision::Int8) add_expert_row_groups(w);
    const Forward f(g.config, w, nullptr, o);
    SequenceState st = SequenceState::empty(g.config);
    SequenceInput in{&st, tokens, false};
    const auto out = f.run({&in, 1})[0];
    return std::vector<double>(out.begin(), out.end());
  };
  ASSERT_EQ(row.size(), size_t(g.config.vocab_size));
  EXPECT_LE(testing::relative_l2(row.data(), last_logits(kernels::GemmPrecision::Int8)), 1e-6);
  EXPECT_GT(testing::relative_l2(row.data(), last_logits(kernels::GemmPrecision::F32)), 1e-4);
}

TEST(Cli, LogitsReplayMatchesGoldenReplay) {
  const auto j = testing::read_json(testing::golden_dir() + "/logits-100-replay.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  const RunResult r =
      run_troupe("logits --model " + testing::golden_dir() + " --replay --tokens " + list);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["positions"], j["positions"]);
  const auto row = got["logits"][0].get<std::vector<float>>();
  EXPECT_LE(testing::relative_l2(row.data(), j["logits"][0].get<std::vector<double>>()), 1e-2);
}

TEST(Cli, GenerateReproducesGoldenGreedyText) {
  const auto j = testing::read_json(testing::golden_dir() + "/generate-text.json");
  const RunResult r = run_troupe("generate --model " + testing::golden_dir() +
                                 " --prompt 'Once upon a time' --max-tokens 8");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, j["generated_text"].get<std::string>() + "\n");
}

TEST(Cli, BadInputExitsWithAClearError) {
  const std::string model = " --model " + testing::golden_dir();
  const struct {
    std::string args, needle;
  } cases[] = {
      {"logits" + model + " --tokens 1,x,3", "not a token id"},
      {"logits" + model + " --tokens 1,99999", "out of range"},
      {"logits" + model + " --tokens 1,2 --replay --all-positions", "--replay"},
      {"logits" + model, "--tokens"},
      {"logits --model /nonexistent --tokens 1", "does not exist"},
      {"generate" + model + " --prompt hi --max-tokens -3", "--max-tokens"},
      {"generate" + model + " --prompt hi --temperature abc", "expects a number"},
      {"generate" + model + " --prompt hi --top-p 2", "top_p"},
      {"generate" + model + " --bogus 1", "unknown flag"},
      {"logits" + model + " --tokens 1,2 --expert-precision fp16", "--expert-precision must be"},
      {"nosuchcommand", "unknown command"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_troupe(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace troupe::model
