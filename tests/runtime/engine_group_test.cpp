// n > 1 groups on the golden model through the Engine: each member of a group (forked
// from the leader's prompt, no replay) gives exactly the tokens of the same request run
// alone in a fresh engine - greedy and seeded sampling, sync and async, with a sibling
// aborted, and with a KV budget so tight the forks fall back to plain requests. The
// prompt is computed once, and every block is back at the end.
#include <gtest/gtest.h>

#include <map>

#include "golden_engine_config.h"
#include "runtime/engine.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

struct GroupRun {
  std::map<RequestId, Ids> tokens;
  std::map<RequestId, std::string> reasons;
  EngineFigures stats;
};

EngineConfig engine_config(bool async, int64_t budget_bytes) {
  return golden_engine_config(budget_bytes, async, /*max_num_batched_tokens=*/32,
                              /*max_num_running=*/4);
}

RequestParams member_params(RequestId id, bool sampled) {
  RequestParams p;
  p.max_tokens = 10 + 2 * int64_t(id % 3);
  p.sampling.seed = 77 + uint64_t(id);
  if (sampled) p.sampling.temperature = 0.9f;
  return p;
}

// Runs the members [first, first + n) as one group (or alone when n == 1).
GroupRun run_group(const EngineConfig& c, const Ids& prompt, RequestId first, int64_t n,
                   bool sampled, RequestId abort_id = -1, int64_t abort_step = -1) {
  const auto& g = testing::golden_model();
  Engine e(*g.forward, nullptr, c);
  std::vector<Sibling> sibs;
  for (RequestId id = first + 1; id < first + n; ++id)
    sibs.push_back({id, member_params(id, sampled)});
  e.add_request(first, prompt, member_params(first, sampled), std::move(sibs));
  GroupRun r;
  for (int64_t s = 0; e.has_unfinished() && s < 500; ++s) {
    if (s == abort_step) e.abort(abort_id);
    for (const RequestOutput& o : e.step()) {
      r.tokens[o.id].insert(r.tokens[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) r.reasons[o.id] = std::string(o.finish_reason());
    }
    e.kv_cache().check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
  r.stats = e.figures();
  return r;
}

// One row per decode of each member: every output token but the first (sampled from a
// prompt's logits) and none past max_tokens.
int64_t decode_rows(const GroupRun& r) {
  int64_t n = 0;
  for (const auto& [id, t] : r.tokens) n += int64_t(t.size()) - 1;
  return n;
}

struct Case {
  const char* name;
  bool async, sampled;
  int64_t prompt;
};

class EngineGroup : public ::testing::TestWithParam<Case> {};

TEST_P(EngineGroup, EachMemberEqualsItsRequestAlone) {
  const Case k = GetParam();
  const EngineConfig c = engine_config(k.async, 64 << 20);
  const Ids prompt = testing::random_tokens(k.prompt, 900 + uint32_t(k.prompt));
  const GroupRun group = run_group(c, prompt, 10, 3, k.sampled);
  for (RequestId id = 10; id < 13; ++id) {
    const GroupRun alone = run_group(c, prompt, id, 1, k.sampled);
    EXPECT_EQ(group.tokens.at(id), alone.tokens.at(id)) << "request " << id;
    EXPECT_EQ(group.reasons.at(id), "length") << "request " << id;
  }
  EXPECT_EQ(group.stats.scheduled_tokens, k.prompt + decode_rows(group));
}

INSTANTIATE_TEST_SUITE_P(Golden, EngineGroup,
                         ::testing::Values(Case{"SyncGreedy", false, false, 37},
                                           Case{"AsyncGreedy", true, false, 37},
                                           Case{"SyncSampled", false, true, 50},
                                           Case{"AsyncSampled", true, true, 50},
                                           Case{"AsyncSampledOneBlock", true, true, 16},
                                           Case{"SyncShort", false, true, 3}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EngineGroupAbort, AbortingOneSiblingLeavesTheOthers) {
  for (bool async : {false, true}) {
    const EngineConfig c = engine_config(async, 64 << 20);
    const Ids prompt = testing::random_tokens(40, 31);
    const GroupRun group = run_group(c, prompt, 20, 3, true, /*abort_id=*/21, /*abort_step=*/4);
    EXPECT_EQ(group.reasons.at(21), "abort") << "async " << async;
    EXPECT_LT(group.tokens.at(21).size(), 10u);
    for (RequestId id : {20, 22})
      EXPECT_EQ(group.tokens.at(id), run_group(c, prompt, id, 1, true).tokens.at(id))
          << "request " << id << " async " << async;
  }
}

// Room for two requests' state only (two ring slots): the third member cannot fork and
// runs as a plain request once a slot frees (prefix hit plus replay), with the same tokens.
TEST(EngineGroupAbort, NoRoomToForkFallsBackToPlainRequests) {
  for (bool async : {false, true}) {
    EngineConfig c = engine_config(async, 64 << 20);
    c.scheduler.max_num_running = 2;
    const Ids prompt = testing::random_tokens(40, 32);
    const GroupRun group = run_group(c, prompt, 30, 3, true);
    for (RequestId id = 30; id < 33; ++id)
      EXPECT_EQ(group.tokens.at(id), run_group(c, prompt, id, 1, true).tokens.at(id))
          << "request " << id << " async " << async;
    EXPECT_GT(group.stats.scheduled_tokens, 40 + decode_rows(group));  // a second prefill
  }
}

}  // namespace
}  // namespace troupe::runtime
