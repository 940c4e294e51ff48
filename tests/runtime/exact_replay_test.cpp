// PrefixReplay::Exact on the model (runtime/executor/executor.h): after a prefix hit at B
// the encoder restarts exact_replay_tokens() before min(B, E_prompt - R) and layer Ne
// keeps the window rows of every recomputed token; the logits of the prefill and of the
// decode steps after it then equal a cold run's bit for bit. The §6 replay as written
// (W tokens) is measured against the same cold run and reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "kernels/sampling.h"
#include "runtime/executor/executor.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;

struct Replay {
  int64_t from = 0;              // P'
  int64_t window_rows_from = -1;  // layer Ne's window rows (-1: §6.2)
};

// Prefill of `prompt` on a state that holds only the global KV of [0, B) (no SWA rings,
// as after a prefix hit; B = 0: cold), then greedy decode steps; logits of each step.
std::vector<std::vector<float>> prefill_then_decode(const std::vector<int32_t>& prompt, int64_t B,
                                                    Replay replay, bool bounded, int64_t steps) {
  const auto& g = golden_model();
  const int64_t E = static_cast<int64_t>(prompt.size());
  const int64_t R = bounded ? g.config.replay_tokens : 0;
  model::SequenceState st = model::SequenceState::empty(g.config);
  if (B > 0) {
    model::SequenceState warm = model::SequenceState::empty(g.config);
    model::SequenceInput pre{&warm, std::span<const int32_t>(prompt.data(), B), false};
    g.forward->run({&pre, 1});
    st.tokens = warm.tokens;
    st.length_ = B;
    for (size_t l = 0; l < st.layers.size(); ++l) {
      st.layers[l].ckv = warm.layers[l].ckv;
      st.layers[l].ikey = warm.layers[l].ikey;
    }
  }
  model::SequenceInput in{&st, std::span<const int32_t>(prompt.data() + replay.from, E - replay.from),
                          false, R > 0 ? std::max(replay.from, E - R) : -1};
  in.first_position = replay.from;
  in.window_rows_from = replay.window_rows_from;
  std::vector<std::vector<float>> out{g.forward->run({&in, 1})[0]};
  for (int64_t i = 1; i < steps; ++i) {
    const int32_t t = kernels::argmax(out.back().data(), g.config.vocab_size);
    model::SequenceInput step{&st, std::span<const int32_t>(&t, 1), false};
    out.push_back(g.forward->run({&step, 1})[0]);
  }
  return out;
}

std::vector<int32_t> prompt_with_tail(int64_t shared, int64_t tail) {
  auto p = testing::random_tokens(shared, 31);
  const auto t = testing::random_tokens(tail, 32);
  p.insert(p.end(), t.begin(), t.end());
  return p;
}

// Hit boundaries before, inside and after the decoder tail's reach.
TEST(ExactPrefixReplay, BoundedReplayEqualsColdRunBitForBit) {
  const auto& g = golden_model();
  const int64_t B = 160, R = g.config.replay_tokens;
  for (const int64_t tail : {3, 9, 17, 40}) {
    const auto prompt = prompt_with_tail(B, tail);
    const int64_t E = static_cast<int64_t>(prompt.size());
    const int64_t from = std::min(B, E - R) - exact_replay_tokens(g.config, true);
    ASSERT_GT(from, 0);
    const auto cold = prefill_then_decode(prompt, 0, {}, true, 4);
    const auto hit = prefill_then_decode(prompt, B, {from, from}, true, 4);
    for (size_t s = 0; s < cold.size(); ++s)
      EXPECT_EQ(hit[s], cold[s]) << "tail " << tail << " step " << s;

    // MODEL.md §6 as written: W tokens of replay, layer Ne rows from min(B, tail).
    const auto window = prefill_then_decode(prompt, B, {B - g.config.sliding_window, -1}, true, 4);
    const std::vector<double> want(cold[0].begin(), cold[0].end());
    std::printf("[ replay ] tail %ld: window replay vs cold, first logits rel L2 %.3g\n", long(tail),
                testing::relative_l2(window[0].data(), want));
  }
}

TEST(ExactPrefixReplay, FullComputeEqualsColdRunBitForBit) {
  const auto& g = golden_model();
  const int64_t B = 208;
  const auto prompt = prompt_with_tail(B, 5);
  const int64_t from = B - exact_replay_tokens(g.config, false);
  ASSERT_GT(from, 0);
  const auto cold = prefill_then_decode(prompt, 0, {}, false, 3);
  const auto hit = prefill_then_decode(prompt, B, {from, -1}, false, 3);
  for (size_t s = 0; s < cold.size(); ++s) EXPECT_EQ(hit[s], cold[s]) << "step " << s;
}

// A replay one window shallower is not enough (so the tests above can fail): the tail's
// first queries read layer-Ne window rows that are then off.
TEST(ExactPrefixReplay, OneWindowShallowerDiffers) {
  const auto& g = golden_model();
  const int64_t B = 160;
  const auto prompt = prompt_with_tail(B, 3);
  const int64_t E = static_cast<int64_t>(prompt.size());
  const int64_t from = E - g.config.replay_tokens - exact_replay_tokens(g.config, true) +
                       g.config.sliding_window;
  const auto cold = prefill_then_decode(prompt, 0, {}, true, 1);
  const auto hit = prefill_then_decode(prompt, B, {from, from}, true, 1);
  EXPECT_NE(hit[0], cold[0]);
}

}  // namespace
}  // namespace troupe::runtime
