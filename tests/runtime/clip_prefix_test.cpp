// clip_prefix (docs/model-notes.md "clip_prefix"): under full compute, a prompt chunk
// ending at least D = (L - 1 - Ne)(W - 1) + 1 tokens before the prompt's end runs the
// decoder on its last row only. The scheduler cuts chunks at E - D and marks the far
// ones; the engine's greedy tokens and full-vocabulary logprobs are compared with a
// full-compute prefill of the same prompt on the plain SequenceState (one forward, every
// layer on every token), within the bound measured and stated in docs/model-notes.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "kernels/sampling.h"
#include "runtime/engine.h"
#include "runtime/executor/logprobs.h"
#include "runtime/golden_engine_config.h"
#include "runtime/greedy_reference.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;
using testing::random_tokens;

// The bound docs/model-notes.md states for the tiny model: max |logprob difference|
// over the whole vocabulary, every generated token.
constexpr float kLogprobBound = 0.0f;

TEST(ClipPrefix, DepthIsTheDecoderCone) {
  const auto& m = golden_model().config;
  EXPECT_EQ(clip_prefix_depth(m),
            (m.num_hidden_layers - m.n_encoder_layers - 1) * (m.sliding_window - 1) + 1);
  EXPECT_EQ(clip_prefix_depth(m), 76);  // tiny: L 12, Ne 6, W 16
}

// The rule in the scheduler: chunks never straddle E - D, those before it are marked.
TEST(ClipPrefix, ChunksAreCutAtTheClipPointAndTheFarOnesMarked) {
  KvCacheConfig kc;
  kc.block_size = 16;
  kc.num_blocks = 64;
  kc.swa_slots = 2;
  KvCacheManager kv(kc);
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 128;
  sc.clip_prefix_depth = 76;
  Scheduler s(sc, kv, 1);
  RequestParams p;
  p.max_tokens = 1;
  p.ignore_eos = true;
  s.add_request(1, random_tokens(600, 5), p);  // cut at 524
  std::vector<std::pair<int64_t, bool>> chunks;  // (end, clipped)
  for (int n = 0; s.has_unfinished() && n < 20; ++n) {
    const StepPlan plan = s.schedule();
    std::vector<SampledChunk> out(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      chunks.emplace_back(plan.chunks[i].end(), plan.chunks[i].clip_decoder);
      if (plan.chunks[i].sample) out[i].tokens = {7};
    }
    s.update(plan, out);
  }
  const std::vector<std::pair<int64_t, bool>> want = {
      {128, true}, {256, true}, {384, true}, {512, true}, {524, true}, {600, false}};
  EXPECT_EQ(chunks, want);
}

using Greedy = GreedyOut;

Greedy run_engine(const std::vector<int32_t>& prompt, bool clip, int64_t chunk, int64_t steps) {
  const auto& g = golden_model();
  EngineConfig c = golden_engine_config(64 << 20, true, chunk, 2);
  c.executor.bounded_replay = false;
  c.executor.clip_prefix = clip;
  Engine e(*g.forward, nullptr, c);
  RequestParams p = greedy(steps);
  p.num_logprobs = int32_t(g.config.vocab_size);
  e.add_request(1, prompt, p);
  Greedy r;
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step()) {
      r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
  return r;
}

// The reference: one full-compute prefill of the whole prompt, then greedy decodes.
Greedy full_compute(const std::vector<int32_t>& prompt, int64_t steps) {
  model::SequenceState st = model::SequenceState::empty(golden_model().config);
  return continue_greedy(st, prompt, -1, steps);
}

// Largest |logprob| difference between two runs' full-vocabulary logprobs (same tokens).
float max_logprob_diff(const Greedy& a, const Greedy& b) {
  float worst = 0;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    std::vector<float> lp(size_t(golden_model().config.vocab_size), 0.0f);
    for (const Logprob& x : b.logprobs[i].top) lp[size_t(x.token)] = x.logprob;
    for (const Logprob& x : a.logprobs[i].top)
      worst = std::max(worst, std::fabs(x.logprob - lp[size_t(x.token)]));
  }
  return worst;
}

TEST(ClipPrefix, EqualsAFullComputePrefillWithinTheStatedBound) {
  const auto prompt = random_tokens(700, 11);
  const int64_t steps = 6;
  const Greedy ref = full_compute(prompt, steps);
  for (int64_t chunk : {int64_t(128), int64_t(1024)}) {
    const Greedy clipped = run_engine(prompt, true, chunk, steps);
    const Greedy plain = run_engine(prompt, false, chunk, steps);
    ASSERT_EQ(clipped.tokens, ref.tokens) << "chunk " << chunk;
    ASSERT_EQ(plain.tokens, ref.tokens) << "chunk " << chunk;
    ASSERT_EQ(clipped.logprobs.size(), size_t(steps));
    const float d_clip = max_logprob_diff(clipped, ref), d_plain = max_logprob_diff(plain, ref);
    std::printf("[ clip_prefix ] chunk %ld: max |logprob - full compute| clipped %.3g, unclipped %.3g\n",
                long(chunk), double(d_clip), double(d_plain));
    EXPECT_LE(d_clip, kLogprobBound) << "chunk " << chunk;
    EXPECT_LE(d_plain, kLogprobBound) << "chunk " << chunk;
  }
}

// The depth is where clipping starts to matter, on the model alone: a first chunk run
// with the decoder on its last row only, then the rest of the prompt under full compute.
// Cut D = 76 before the end, the logits equal one full-compute prefill bit for bit; cut W
// = 16 before it, the second chunk's decoder reads window rows the first one skipped.
TEST(ClipPrefix, TheDepthIsWhereClippingStartsToMatter) {
  const auto& g = golden_model();
  const auto prompt = random_tokens(300, 12);
  model::SequenceState full = model::SequenceState::empty(g.config);
  model::SequenceInput whole{&full, prompt, false, -1};
  const std::vector<float> want = g.forward->run({&whole, 1})[0];
  auto clipped_at = [&](int64_t cut) {
    model::SequenceState st = model::SequenceState::empty(g.config);
    const std::span<const int32_t> p(prompt);
    model::SequenceInput far{&st, p.first(size_t(cut)), false, cut - 1};
    g.forward->run({&far, 1});
    model::SequenceInput rest{&st, p.subspan(size_t(cut)), false, -1};
    const std::vector<float> got = g.forward->run({&rest, 1})[0];
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    return worst;
  };
  const int64_t E = int64_t(prompt.size());
  EXPECT_EQ(clipped_at(E - clip_prefix_depth(g.config)), 0.0f);
  EXPECT_GT(clipped_at(E - g.config.sliding_window), 0.0f);
}

// Only full compute changes: with a decoder tail the setting is a no-op (depth 0).
TEST(ClipPrefix, OffUnderBoundedReplay) {
  const auto& m = golden_model().config;
  EngineConfig c = golden_engine_config(64 << 20, true, 128, 2);
  c.executor.clip_prefix = true;
  c.executor.bounded_replay = true;
  prepare_engine(m, c);
  EXPECT_EQ(c.scheduler.clip_prefix_depth, 0);
  c.executor.bounded_replay = false;
  prepare_engine(m, c);
  EXPECT_EQ(c.scheduler.clip_prefix_depth, 76);
}

}  // namespace
}  // namespace troupe::runtime
