// The scheduler with speculative decoding on (num_speculative_tokens = k), over a real
// KvCacheManager and a mocked model: a greedy decode takes k + 1 tokens of the step's
// budget (fewer near max_tokens, max_model_len or the budget's end), sampled requests
// speculate too, accepted drafts advance the computed count, and EOS inside an accepted
// run ends the request at the EOS token.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/check.h"

#include <map>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/scheduler/scheduler.h"

namespace troupe::runtime {
namespace {

constexpr int32_t kEos = 1;

struct SpecHarness {
  explicit SpecHarness(int64_t budget, int64_t k = 3) : kv(kv_config()), s(config(budget, k), kv, kEos) {}

  static KvCacheConfig kv_config() {
    KvCacheConfig c;
    c.block_size = 4;
    c.num_blocks = 256;
    c.swa_slots = 16;
    c.enable_prefix_cache = false;
    return c;
  }
  static SchedulerConfig config(int64_t budget, int64_t k) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.num_speculative_tokens = k;
    c.chunk_lookback_tokens = 1;
    return c;
  }
  void add(RequestId id, int64_t prompt_len, int64_t max_tokens, float temperature = 0.0f) {
    RequestParams p;
    p.max_tokens = max_tokens;
    p.sampling.temperature = temperature;
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>(100 + id * 50 + i));
    s.add_request(id, prompt, p);
  }
  // Runs one step; a speculative chunk gets `accept` of its drafts (capped) plus a token.
  StepPlan step(const std::map<RequestId, std::vector<int32_t>>& emit = {}) {
    StepPlan plan = s.schedule();
    std::vector<SampledChunk> sampled(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& c = plan.chunks[i];
      if (!c.sample) continue;
      auto it = emit.find(c.id);
      if (it != emit.end() && c.num_draft_tokens > 0) {
        sampled[i].tokens = it->second;
        sampled[i].num_draft_tokens = c.num_draft_tokens;
      } else {
        sampled[i].tokens = {static_cast<int32_t>(7 + c.end())};
      }
    }
    for (const RequestOutput& o : s.update(plan, sampled)) {
      outputs[o.id].insert(outputs[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) reasons[o.id] = std::string(o.finish_reason());
    }
    kv.check_invariants();
    return plan;
  }

  KvCacheManager kv;
  Scheduler s;
  std::map<RequestId, std::vector<int32_t>> outputs;
  std::map<RequestId, std::string> reasons;
};

TEST(SpeculativeScheduler, DecodeTakesKPlusOneTokensOfTheBudget) {
  SpecHarness h(10);
  for (RequestId id = 0; id < 4; ++id) h.add(id, 2, 100);
  h.step();  // 4 prefills of 2 tokens, each samples its first token
  const StepPlan p = h.step();
  // 4 + 4 + (1 + 1): the third decode gets the budget's last draft slot, the fourth waits.
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.num_tokens, 10);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p.chunks[i].start, 2);
    EXPECT_EQ(p.chunks[i].token_ids.size(), 1u);  // [the last sampled token]
    EXPECT_TRUE(p.chunks[i].sample);
    EXPECT_EQ(p.chunks[i].snapshot_slot, -1);
  }
  EXPECT_EQ(p.chunks[0].num_draft_tokens, 3);
  EXPECT_EQ(p.chunks[1].num_draft_tokens, 3);
  EXPECT_EQ(p.chunks[2].num_draft_tokens, 1);
  EXPECT_EQ(p.chunks[0].num_tokens, 4);
  EXPECT_EQ(p.chunks[2].num_tokens, 2);
}

TEST(SpeculativeScheduler, AcceptedDraftsAdvanceTheRequest) {
  SpecHarness h(64);
  h.add(0, 5, 100);
  h.step();
  h.step({{0, {20, 21, 22}}});  // 2 of 3 drafts accepted, then the target's token
  EXPECT_EQ(h.outputs[0], (std::vector<int32_t>{7 + 5, 20, 21, 22}));
  const Request* r = h.s.find(0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_computed_tokens, 5 + 1 + 2);  // prompt, the bonus, two drafts
  const StepPlan p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(p.chunks[0].token_ids, std::vector<int32_t>{22});
}

TEST(SpeculativeScheduler, DraftsStopAtMaxTokens) {
  SpecHarness h(64);
  h.add(0, 3, 3);
  h.step();  // output 1 of 3
  const StepPlan p = h.step({{0, {30, 31}}});
  EXPECT_EQ(p.chunks[0].num_draft_tokens, 1);  // 2 more at most: one draft + the target's
  EXPECT_EQ(h.outputs[0].size(), 3u);
  EXPECT_EQ(h.reasons[0], "length");
}

TEST(SpeculativeScheduler, EosInsideAnAcceptedRunEndsThere) {
  SpecHarness h(64);
  h.add(0, 3, 100);
  h.step();
  h.step({{0, {40, kEos, 41}}});  // EOS accepted as the second draft
  EXPECT_EQ(h.outputs[0], (std::vector<int32_t>{7 + 3, 40, kEos}));
  EXPECT_EQ(h.reasons[0], "stop");
  EXPECT_EQ(h.kv.num_used_blocks(), 0);
}

TEST(SpeculativeScheduler, SampledRequestsSpeculateWithTheirOutputIndex) {
  SpecHarness h(64);
  h.add(0, 3, 100, /*temperature=*/0.8f);
  h.step();
  const StepPlan p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].num_draft_tokens, 3);
  EXPECT_EQ(p.chunks[0].sample_counter, 1u);  // output token 1 (row j draws with 1 + j)
}

TEST(SpeculativeScheduler, NeedsTheAnchorTokenInTheLookback) {
  KvCacheManager kv(SpecHarness::kv_config());
  SchedulerConfig c = SpecHarness::config(64, 3);
  c.chunk_lookback_tokens = 0;
  EXPECT_THROW(Scheduler(c, kv, kEos), troupe::Error);
}

}  // namespace
}  // namespace troupe::runtime
