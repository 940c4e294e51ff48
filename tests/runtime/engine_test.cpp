// The engine end to end on the golden tiny model: batched, chunked, paged runs with
// preemption give the greedy tokens of the plain single-request forward; aborts and
// finishes leave no block behind; prefix hits replay as MODEL.md §6 says (window) or give
// the cold run's tokens (exact).
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kernels/sampling.h"
#include "model/footprint.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;

using testing::random_tokens;

// Greedy continuation with the plain forward (one request, contiguous state).
std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  const auto& g = golden_model();
  model::SequenceState st = model::SequenceState::empty(g.config);
  std::vector<int32_t> next = prompt, out;
  for (int64_t i = 0; i < n; ++i) {
    model::SequenceInput in{&st, next, false};
    const auto logits = g.forward->run({&in, 1});
    out.push_back(kernels::argmax(logits[0].data(), g.config.vocab_size));
    next = {out.back()};
  }
  return out;
}

EngineConfig small_engine(int64_t budget_bytes, bool prefix_cache, bool replay) {
  // 48 tokens per step force chunked prefill.
  EngineConfig c = golden_engine_config(budget_bytes, EngineConfig{}.async_scheduling, 48, 6);
  c.enable_prefix_cache = prefix_cache;
  c.executor.bounded_replay = replay;
  return c;
}

// Runs every request to the end; returns the output tokens by id.
std::map<RequestId, std::vector<int32_t>> drain(Engine& e, int64_t* steps = nullptr) {
  std::map<RequestId, std::vector<int32_t>> out;
  int64_t n = 0;
  while (e.has_unfinished()) {
    for (const RequestOutput& o : e.step())
      out[o.id].insert(out[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
    e.kv_cache().check_invariants();
    if (++n > 5000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
  }
  if (steps) *steps = n;
  return out;
}

TEST(Engine, MixedWorkloadMatchesPlainForward) {
  const auto& g = golden_model();
  // Budget for 6 running requests' state plus 12 blocks of 16 tokens: preemption happens.
  const int64_t per_request = model::request_state_bytes(g.config).swa_bytes +
                              model::request_state_bytes(g.config).dspark_bytes +
                              model::request_state_bytes(g.config).compressor_bytes;
  const int64_t budget = 6 * per_request + 12 * 16 * 212;
  Engine e(*g.forward, nullptr, small_engine(budget, /*prefix_cache=*/false, /*replay=*/false));
  std::map<RequestId, std::vector<int32_t>> prompts;
  const int64_t lens[] = {3, 70, 17, 130, 1, 45, 90};
  for (int i = 0; i < 7; ++i) {
    prompts[i] = random_tokens(lens[i], 100 + i);
    e.add_request(i, prompts[i], greedy(6));
  }
  const auto out = drain(e);
  for (const auto& [id, prompt] : prompts)
    EXPECT_EQ(out.at(id), reference_greedy(prompt, 6)) << "request " << id;
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
  EXPECT_GT(e.figures().preemptions, 0);  // the budget was tight enough to preempt
}

TEST(Engine, AbortFreesBlocksAndOthersFinish) {
  const auto& g = golden_model();
  Engine e(*g.forward, nullptr, small_engine(64 << 20, true, true));
  e.add_request(1, random_tokens(100, 7), greedy(20));
  e.add_request(2, random_tokens(30, 8), greedy(4));
  e.step();
  e.abort(1);
  const auto out = drain(e);
  EXPECT_EQ(out.at(2).size(), 4u);
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
}

// Greedy continuation after a prefix hit at B, as MODEL.md §6 defines it, on the plain
// contiguous state: global rows of [0, B) as a cold prefill left them, no SWA rings,
// replay from max(0, B - W), decoder on the prompt's last R tokens.
std::vector<int32_t> reference_after_hit(const std::vector<int32_t>& prompt, int64_t B, int64_t n) {
  const auto& g = golden_model();
  model::SequenceState warm = model::SequenceState::empty(g.config);
  model::SequenceInput pre{&warm, std::span<const int32_t>(prompt.data(), B), false};
  g.forward->run({&pre, 1});
  model::SequenceState st = model::SequenceState::empty(g.config);
  st.tokens = warm.tokens;
  st.length_ = B;
  for (size_t l = 0; l < st.layers.size(); ++l) {
    st.layers[l].ckv = warm.layers[l].ckv;
    st.layers[l].ikey = warm.layers[l].ikey;
  }
  const int64_t E = static_cast<int64_t>(prompt.size());
  const int64_t from = std::max<int64_t>(0, B - g.config.sliding_window);
  model::SequenceInput in{&st, std::span<const int32_t>(prompt.data() + from, E - from), false,
                          std::max(from, E - g.config.replay_tokens)};
  in.first_position = from;
  auto logits = g.forward->run({&in, 1});
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(kernels::argmax(logits[0].data(), g.config.vocab_size));
    model::SequenceInput step{&st, std::span<const int32_t>(&out.back(), 1), false};
    logits = g.forward->run({&step, 1});
  }
  return out;
}

TEST(Engine, PrefixHitReplaysAsSpecified) {
  const auto& g = golden_model();
  EngineConfig c = small_engine(64 << 20, true, true);
  c.executor.prefix_replay = PrefixReplay::Window;
  c.enable_prefix_snapshots = false;  // the replay itself is tested (snapshots: prefix_snapshot_test)
  Engine e(*g.forward, nullptr, c);
  const auto shared = random_tokens(80, 21);
  auto a = shared, b = shared;
  const auto tail_a = random_tokens(5, 22), tail_b = random_tokens(9, 23);
  a.insert(a.end(), tail_a.begin(), tail_a.end());
  b.insert(b.end(), tail_b.begin(), tail_b.end());
  e.add_request(1, a, greedy(4));
  const auto cold = drain(e);
  e.add_request(2, b, greedy(4));
  const auto warm_b = drain(e);
  e.add_request(3, a, greedy(4));
  const auto warm_a = drain(e);
  const auto& stats = e.kv_cache().stats();
  EXPECT_EQ(stats.prefix_hits, 2);
  EXPECT_EQ(stats.hit_tokens, 80 + 80);  // 5 blocks of 16 each time
  // The hit path computes exactly what §6 says (paged engine == contiguous reference).
  EXPECT_EQ(warm_b.at(2), reference_after_hit(b, 80, 4));
  EXPECT_EQ(warm_a.at(3), reference_after_hit(a, 80, 4));
  std::printf("[ prefix ] cold %d %d %d %d | after a hit %d %d %d %d\n", cold.at(1)[0], cold.at(1)[1],
              cold.at(1)[2], cold.at(1)[3], warm_a.at(3)[0], warm_a.at(3)[1], warm_a.at(3)[2],
              warm_a.at(3)[3]);
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
}

// PrefixReplay::Exact (the default) through the paged engine: the tokens after a hit are
// the cold run's, for hit boundaries far from and close to the prompt's end (the logits
// are compared bit for bit in exact_replay_test.cpp).
TEST(Engine, ExactPrefixReplayMatchesColdRun) {
  const auto& g = golden_model();
  ASSERT_GT(exact_replay_tokens(g.config, true), g.config.sliding_window);
  for (const int64_t tail : {3, 9, 40}) {
    EngineConfig c = small_engine(64 << 20, true, true);
    c.executor.prefix_replay = PrefixReplay::Exact;
    c.enable_prefix_snapshots = false;  // the hits at 160 would restore request 1's rings
    Engine e(*g.forward, nullptr, c);
    Engine cold_engine(*g.forward, nullptr, small_engine(64 << 20, false, true));
    const auto shared = random_tokens(160, 31);
    auto a = shared, b = shared;
    const auto tail_a = random_tokens(tail, 32), tail_b = random_tokens(tail + 1, 33);
    a.insert(a.end(), tail_a.begin(), tail_a.end());
    b.insert(b.end(), tail_b.begin(), tail_b.end());
    e.add_request(1, b, greedy(1));
    drain(e);
    e.add_request(2, a, greedy(8));
    const auto warm = drain(e);
    cold_engine.add_request(2, a, greedy(8));
    const auto cold = drain(cold_engine);
    EXPECT_EQ(e.kv_cache().stats().hit_tokens, 160) << "tail " << tail;
    EXPECT_EQ(warm.at(2), cold.at(2)) << "tail " << tail;
  }
}

}  // namespace
}  // namespace troupe::runtime
