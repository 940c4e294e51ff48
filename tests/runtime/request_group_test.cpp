// n > 1 request groups in the scheduler, with a mocked model: only the leader's prompt is
// prefilled, each sibling is forked in the plan that ends it (a fork chunk: no rows, a
// sample of its own) and decodes with the others from then on. Members keep their own
// outputs and aborts; a leader that ends early or a cache without room leaves siblings
// as plain requests. Each member's tokens must equal the same request run alone.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "kernels/check.h"
#include "plan_driver.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

// The mocked model: the next token depends on the last input token and the request id
// (its own sampling stream), so a member sampled with a wrong id or state shows.
int32_t next_token(int32_t last, RequestId id) {
  return 10 + int32_t((last * 7 + 3 + id) % 500);
}

struct Harness : PlanDriver {
  Harness(bool async, int64_t budget, int64_t slots = 8, int64_t num_blocks = 64)
      : PlanDriver(kv_config(slots, num_blocks), budget, async) {}
  static KvCacheConfig kv_config(int64_t slots, int64_t num_blocks) {
    KvCacheConfig c;
    c.block_size = 4, c.num_blocks = num_blocks, c.swa_slots = slots;
    return c;
  }

  std::vector<SampledChunk> execute(const StepPlan& plan) {
    std::vector<SampledChunk> out(plan.chunks.size());
    std::map<RequestId, int32_t> last_input;  // this plan's chunks
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& c = plan.chunks[i];
      int32_t last = 0;
      if (c.fork) {
        EXPECT_EQ(c.num_tokens, 0);
        last = last_input.at(c.fork->parent);  // the leader's chunk comes first
      } else {
        last = c.token_ids.back() == kPlaceholderToken ? last_sampled.at(c.id) : c.token_ids.back();
        last_input[c.id] = last;
        prefill_tokens += c.prefill ? c.num_tokens : 0;
      }
      if (c.sample) out[i].tokens = {last_sampled[c.id] = next_token(last, c.id)};
    }
    return out;
  }

  // hook(step) runs before each plan is made (aborts).
  void drain(const std::function<void(int64_t)>& hook = {}) {
    run([this](const StepPlan& plan) { return execute(plan); }, /*max_steps=*/300, hook);
    EXPECT_FALSE(s.has_unfinished());
    EXPECT_EQ(kv.num_used_blocks(), 0);
  }

  std::map<RequestId, int32_t> last_sampled;
  int64_t prefill_tokens = 0;
};

const Ids kPrompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};  // 2.5 blocks

RequestParams params(int64_t max_tokens) {
  RequestParams p;
  p.max_tokens = max_tokens;
  return p;
}

std::vector<Sibling> siblings(std::initializer_list<RequestId> ids, int64_t max_tokens) {
  std::vector<Sibling> out;
  for (RequestId id : ids) out.push_back({id, params(max_tokens)});
  return out;
}

// The tokens request `id` gives alone.
Ids alone(RequestId id, int64_t max_tokens) {
  Harness h(false, 100);
  h.s.add_request(id, kPrompt, params(max_tokens));
  h.drain();
  return h.outputs.at(id);
}

class RequestGroup : public ::testing::TestWithParam<bool> {};  // async scheduling

TEST_P(RequestGroup, OnePrefillThenEveryMemberDecodesEachStep) {
  Harness h(GetParam(), 100);
  h.s.add_request(1, kPrompt, params(4), siblings({2, 3}, 4));
  h.drain();
  EXPECT_EQ(h.prefill_tokens, 10);  // the prompt once, not three times
  ASSERT_GE(h.plans.size(), 4u);
  // Step 0: the prompt and two forks; then three decodes per step.
  struct Row {
    RequestId id;
    int64_t start, n;
    bool fork;
  };
  std::vector<Row> got;
  for (const ScheduledChunk& c : h.plans[0].chunks)
    got.push_back({c.id, c.start, c.num_tokens, bool(c.fork)});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].id == 1 && got[0].n == 10 && !got[0].fork);
  EXPECT_TRUE(got[1].id == 2 && got[1].start == 10 && got[1].n == 0 && got[1].fork);
  EXPECT_TRUE(got[2].id == 3 && got[2].start == 10 && got[2].n == 0 && got[2].fork);
  EXPECT_EQ(h.plans[0].num_tokens, 10);
  for (size_t p = 1; p < 4; ++p) {
    ASSERT_EQ(h.plans[p].chunks.size(), 3u) << "step " << p;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(h.plans[p].chunks[i].id, RequestId(i + 1)) << "step " << p;
      EXPECT_EQ(h.plans[p].chunks[i].num_tokens, 1) << "step " << p;
      EXPECT_EQ(h.plans[p].chunks[i].start, int64_t(9 + p)) << "step " << p;
    }
  }
  for (RequestId id : {1, 2, 3}) {
    EXPECT_EQ(h.outputs.at(id), alone(id, 4)) << "request " << id;
    EXPECT_EQ(h.reasons.at(id), "length") << "request " << id;
  }
  EXPECT_NE(h.outputs.at(1), h.outputs.at(2));  // the mock's id dependence shows
  EXPECT_EQ(h.cached.at(2), 10);                // a sibling reports its whole prompt as cached
}

TEST_P(RequestGroup, ChunkedPrefillForksAtTheLastChunk) {
  Harness h(GetParam(), 4);
  h.s.add_request(1, kPrompt, params(3), siblings({2}, 5));
  EXPECT_EQ(h.s.waiting_ids(), (std::vector<RequestId>{1, 2}));  // the sibling waits too
  h.drain();
  EXPECT_EQ(h.prefill_tokens, 10);
  for (size_t p = 0; p < 3; ++p) {
    ASSERT_EQ(h.plans[p].chunks.size(), p < 2 ? 1u : 2u) << "step " << p;
    EXPECT_EQ(h.plans[p].chunks[0].id, 1);
  }
  EXPECT_TRUE(h.plans[2].chunks[1].fork);
  EXPECT_EQ(h.outputs.at(1), alone(1, 3));
  EXPECT_EQ(h.outputs.at(2), alone(2, 5));
}

TEST_P(RequestGroup, AbortingASiblingBeforeTheForkLeavesTheOthers) {
  Harness h(GetParam(), 4);
  h.s.add_request(1, kPrompt, params(3), siblings({2, 3}, 3));
  h.drain([&](int64_t n) {
    if (n == 1) h.s.abort(2);
  });
  EXPECT_EQ(h.reasons.at(2), "abort");
  EXPECT_TRUE(h.outputs.at(2).empty());
  EXPECT_EQ(h.outputs.at(1), alone(1, 3));
  EXPECT_EQ(h.outputs.at(3), alone(3, 3));
  EXPECT_EQ(h.prefill_tokens, 10);
}

// The leader ends before its prompt: its siblings run as plain requests, in full.
TEST_P(RequestGroup, AbortingTheLeaderBeforeItsPromptRequeuesTheSiblings) {
  Harness h(GetParam(), 4);
  h.s.add_request(1, kPrompt, params(3), siblings({2, 3}, 3));
  h.drain([&](int64_t n) {
    if (n == 1) h.s.abort(1);
  });
  EXPECT_EQ(h.reasons.at(1), "abort");
  EXPECT_EQ(h.outputs.at(2), alone(2, 3));
  EXPECT_EQ(h.outputs.at(3), alone(3, 3));
  EXPECT_EQ(h.reasons.at(3), "length");
}

// Aborted after the plan that forked: the siblings already hold their own state.
TEST_P(RequestGroup, AbortingTheLeaderAfterTheForkKeepsTheSiblings) {
  Harness h(GetParam(), 100);
  h.s.add_request(1, kPrompt, params(5), siblings({2, 3}, 5));
  h.drain([&](int64_t n) {
    if (n == 1) h.s.abort(1);
  });
  EXPECT_EQ(h.reasons.at(1), "abort");
  EXPECT_EQ(h.outputs.at(2), alone(2, 5));
  EXPECT_EQ(h.outputs.at(3), alone(3, 5));
  EXPECT_EQ(h.prefill_tokens, 10);
}

// Two ring slots: one sibling forks, the other is queued as a plain request and
// prefills its prompt itself once a slot is free.
TEST_P(RequestGroup, NoRoomToForkQueuesThePlainRequest) {
  Harness h(GetParam(), 100, /*slots=*/2);
  h.s.add_request(1, kPrompt, params(3), siblings({2, 3}, 3));
  h.drain();
  ASSERT_EQ(h.plans[0].chunks.size(), 2u);
  EXPECT_TRUE(h.plans[0].chunks[1].fork);
  for (RequestId id : {1, 2, 3}) EXPECT_EQ(h.outputs.at(id), alone(id, 3)) << "request " << id;
  EXPECT_GT(h.prefill_tokens, 10);
}

TEST_P(RequestGroup, BadMembersAreRejectedWhole) {
  Harness h(GetParam(), 100);
  h.s.add_request(7, kPrompt, params(3));
  EXPECT_THROW(h.s.add_request(1, kPrompt, params(3), siblings({2, 2}, 3)), troupe::Error);
  EXPECT_THROW(h.s.add_request(1, kPrompt, params(3), siblings({1}, 3)), troupe::Error);
  EXPECT_THROW(h.s.add_request(1, kPrompt, params(3), siblings({7}, 3)), troupe::Error);
  auto bad = siblings({2}, 3);
  bad[0].params.max_tokens = 0;
  EXPECT_THROW(h.s.add_request(1, kPrompt, params(3), bad), troupe::Error);
  EXPECT_EQ(h.s.find(1), nullptr);
  EXPECT_EQ(h.s.find(2), nullptr);
  h.drain();
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, RequestGroup, ::testing::Bool());

}  // namespace
}  // namespace troupe::runtime
