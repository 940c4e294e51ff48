// Asynchronous scheduling (step N+1 planned before step N's samples are known): the
// scheduler plans a decode of a token still in flight as a placeholder the executor fills
// in. Scheduler-level tables with a mocked model that needs the real token (so a wrong
// fill-in shows), then the golden model: async == sync outputs on mixed workloads with
// seeds, stops, preemption and aborts, and no block left behind.
#include <gtest/gtest.h>

#include <map>

#include "golden_engine_config.h"
#include "model/footprint.h"
#include "plan_driver.h"
#include "runtime/engine.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

KvCacheConfig kv_config(int64_t num_blocks) {
  KvCacheConfig c;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.swa_slots = 8;
  c.enable_prefix_cache = false;
  return c;
}

// The mocked model's next token depends on the chunk's last input token, so a chunk
// whose placeholder was filled wrongly produces a different sequence.
int32_t next_token(int32_t last) { return 10 + (last * 7 + 3) % 500; }

// Runs plans one ahead, as the actors do: plan N+1, then "execute" N (filling
// placeholders from the tokens sampled in earlier steps) and update N.
struct AsyncHarness : PlanDriver {
  AsyncHarness(int64_t num_blocks, int64_t budget)
      : PlanDriver(kv_config(num_blocks), budget, /*async=*/true) {}

  std::vector<SampledChunk> execute(const StepPlan& plan) {
    std::vector<SampledChunk> out(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& c = plan.chunks[i];
      int32_t last = c.token_ids.back();
      if (last == kPlaceholderToken) last = last_sampled.at(c.id);
      if (c.sample) {
        out[i].tokens = {next_token(last)};
        last_sampled[c.id] = out[i].tokens[0];
      }
    }
    return out;
  }

  void drain() {
    run([this](const StepPlan& plan) { return execute(plan); }, /*max_steps=*/200);
  }

  std::map<RequestId, int32_t> last_sampled;
};

Ids chain(int32_t last, int64_t n) {
  Ids out;
  for (int64_t i = 0; i < n; ++i) out.push_back(last = next_token(last));
  return out;
}

TEST(AsyncScheduling, DecodesEveryStepWithAPlaceholder) {
  AsyncHarness h(64, 100);
  RequestParams p;
  p.max_tokens = 4;
  h.s.add_request(1, Ids{5, 6, 7}, p);
  h.drain();
  EXPECT_EQ(h.outputs.at(1), chain(7, 4));
  EXPECT_EQ(h.reasons.at(1), "length");
  // Prefill, then one decode per step although each plan was made before the previous
  // step's token was known; the last planned decode is the 4th token's (max_tokens).
  ASSERT_EQ(h.plans.size(), 4u);
  for (size_t i = 1; i < 4; ++i) {
    ASSERT_EQ(h.plans[i].chunks.size(), 1u) << i;
    const ScheduledChunk& c = h.plans[i].chunks[0];
    EXPECT_EQ(c.start, int64_t(2 + i));
    EXPECT_EQ(c.token_ids, Ids{kPlaceholderToken});
    EXPECT_EQ(c.sample_counter, uint64_t(i));  // the output index of the token it samples
    EXPECT_EQ(c.lookback.size(), 0u);          // no Engram lookback configured here
  }
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

// A stop token ends a request while its next decode is already planned: that decode is
// dropped, nothing past the stop is reported, and its blocks come back.
TEST(AsyncScheduling, StopWithADecodeInFlightDropsIt) {
  AsyncHarness h(64, 100);
  RequestParams p;
  p.max_tokens = 50;
  const Ids want = chain(7, 3);
  p.stop_token_ids = {want[2]};
  h.s.add_request(1, Ids{5, 6, 7}, p);
  h.drain();
  EXPECT_EQ(h.outputs.at(1), want);
  EXPECT_EQ(h.reasons.at(1), "stop");
  EXPECT_EQ(h.plans.size(), 4u);  // the 4th step ran a decode nobody needed
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

// Blocks run out with decodes in flight: the newest request is preempted, its in-flight
// sample is dropped, and it recomputes to the same tokens.
TEST(AsyncScheduling, PreemptionWithAPlaceholderRecomputesTheSameTokens) {
  AsyncHarness h(5, 100);  // 20 tokens of KV; the two need 12 each
  RequestParams p;
  p.max_tokens = 8;
  h.s.add_request(1, Ids{5, 6, 7, 8, 9}, p);
  h.s.add_request(2, Ids{15, 16, 17, 18, 19}, p);
  h.drain();
  EXPECT_EQ(h.outputs.at(1), chain(9, 8));
  EXPECT_EQ(h.outputs.at(2), chain(19, 8));
  bool preempted = false;
  for (const StepPlan& plan : h.plans) preempted |= !plan.preempted.empty();
  EXPECT_TRUE(preempted);
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

// --- the golden model through the Engine --------------------------------------------

struct Result {
  Ids tokens;
  std::string reason;
};

std::map<RequestId, Result> run_workload(bool async, int64_t budget_bytes, bool abort_one) {
  const auto& g = testing::golden_model();
  Engine e(*g.forward, nullptr,
           golden_engine_config(budget_bytes, async, /*max_num_batched_tokens=*/40,
                                /*max_num_running=*/5));
  const int64_t lens[] = {3, 60, 17, 33, 1, 45};
  for (int i = 0; i < 6; ++i) {
    RequestParams p;
    p.max_tokens = 12 + 4 * i;
    p.sampling.seed = 1000 + i;
    if (i % 2 == 1) p.sampling.temperature = 0.8f;  // seeded sampling: same Philox draws
    if (i == 3) p.stop_token_ids = {static_cast<int32_t>(g.config.eos_token_id)};
    e.add_request(i, testing::random_tokens(lens[i], 300 + i), p);
  }
  std::map<RequestId, Result> out;
  for (int n = 0; e.has_unfinished() && n < 2000; ++n) {
    if (abort_one && n == 3) e.abort(1);
    for (const RequestOutput& o : e.step()) {
      out[o.id].tokens.insert(out[o.id].tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) out[o.id].reason = std::string(o.finish_reason());
    }
    e.kv_cache().check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
  if (budget_bytes < (1 << 20)) {
    EXPECT_GT(e.figures().preemptions, 0);
  }
  return out;
}

void expect_same(const std::map<RequestId, Result>& a, const std::map<RequestId, Result>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [id, r] : a) {
    EXPECT_EQ(r.tokens, b.at(id).tokens) << "request " << id;
    EXPECT_EQ(r.reason, b.at(id).reason) << "request " << id;
  }
}

TEST(AsyncScheduling, EngineOutputsEqualSynchronousOnes) {
  const auto sync = run_workload(false, 64 << 20, false);
  const auto async = run_workload(true, 64 << 20, false);
  expect_same(sync, async);
  EXPECT_EQ(sync.at(5).tokens.size(), 32u);  // max_tokens 12 + 4 * 5
}

TEST(AsyncScheduling, EngineWithPreemptionAndAbortEqualsSynchronous) {
  const auto& g = testing::golden_model();
  const int64_t per_request = model::request_state_bytes(g.config).swa_bytes +
                              model::request_state_bytes(g.config).dspark_bytes +
                              model::request_state_bytes(g.config).compressor_bytes;
  // Window snapshots (engine default, 2 per running request) reserve rings + carry each.
  const int64_t snapshots = 10 * (model::request_state_bytes(g.config).swa_bytes +
                                  model::request_state_bytes(g.config).compressor_bytes);
  const int64_t tight = 5 * per_request + snapshots + 5 * 16 * 212;  // 5 blocks: preempts
  const auto sync = run_workload(false, tight, true);
  const auto async = run_workload(true, tight, true);
  expect_same(sync, async);
  EXPECT_EQ(async.at(1).reason, "abort");
}

}  // namespace
}  // namespace troupe::runtime
