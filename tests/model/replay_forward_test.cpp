// Bounded replay (MODEL.md §6) for one prefill from position 0: layers < Ne and layer
// Ne's KV/window rows cover every token, the decoder only the last R tokens. Checked
// against the golden replay logits, and its distance from full compute is reported.
#include <gtest/gtest.h>

#include "kernels/sampling.h"
#include "support/golden.h"

namespace troupe::model {
namespace {

using testing::golden_dir;
using testing::golden_model;

std::vector<float> last_logits(const std::vector<int32_t>& tokens, int64_t tail_start) {
  const auto& g = golden_model();
  SequenceState st = SequenceState::empty(g.config);
  SequenceInput in{&st, tokens, false, tail_start};
  auto out = g.forward->run({&in, 1});
  EXPECT_EQ(st.length(), static_cast<int64_t>(tokens.size()));
  return out[0];
}

TEST(Replay, SinglePrefillMatchesGolden) {
  const auto& g = golden_model();
  const auto j = testing::read_json(golden_dir() + "/logits-100-replay.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  ASSERT_EQ(j["positions"].get<std::vector<int64_t>>(), std::vector<int64_t>{99});
  const auto want = j["logits"].get<std::vector<std::vector<double>>>();
  const int64_t E = static_cast<int64_t>(tokens.size());
  const std::vector<float> got = last_logits(tokens, std::max<int64_t>(0, E - g.config.replay_tokens));
  ASSERT_EQ(static_cast<int64_t>(got.size()), g.config.vocab_size);
  const double err = testing::relative_l2(got.data(), want[0]);
  std::printf("[ replay ] golden relative L2 %.3g\n", err);
  EXPECT_LE(err, 1e-2);
  EXPECT_EQ(kernels::argmax(got.data(), g.config.vocab_size), testing::argmax_of(want[0]));
}

TEST(Replay, DiffersFromFullComputeButKeepsGreedyToken) {
  const auto& g = golden_model();
  const auto j = testing::read_json(golden_dir() + "/logits-100-all.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  const int64_t V = g.config.vocab_size, E = static_cast<int64_t>(tokens.size());
  const std::vector<float> full = last_logits(tokens, -1);
  const std::vector<float> replay = last_logits(tokens, E - g.config.replay_tokens);
  std::vector<double> ref(full.begin(), full.end());
  const double diff = testing::relative_l2(replay.data(), ref);
  std::printf("[ replay ] bounded replay vs full compute: relative L2 %.3g\n", diff);
  EXPECT_GT(diff, 0.0);  // §6: not numerically identical (missing decoder window rows)
  EXPECT_EQ(kernels::argmax(replay.data(), V), kernels::argmax(full.data(), V));
}

TEST(Replay, TailCoveringEverythingIsFullCompute) {
  const auto j = testing::read_json(golden_dir() + "/logits-24-all.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(last_logits(tokens, 0), last_logits(tokens, -1));
}

TEST(Replay, EmptyTailGivesNoLogitsButWritesEncoderState) {
  const auto& g = golden_model();
  const auto j = testing::read_json(golden_dir() + "/logits-24-all.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  SequenceState st = SequenceState::empty(g.config);
  SequenceInput in{&st, tokens, false, 1000};
  const auto out = g.forward->run({&in, 1});
  EXPECT_TRUE(out[0].empty());
  EXPECT_EQ(st.length(), 24);
  EXPECT_EQ(st.compressed_rows(g.config.n_encoder_layers), 24);  // layer Ne wrote every row
  for (int64_t p : st.layers[g.config.n_encoder_layers + 1].window_pos) EXPECT_EQ(p, -1);
}

}  // namespace
}  // namespace troupe::model
