// KvCacheManager as tables of expected state per step (STYLE.md 13): allocation and
// growth, out of blocks with no side effects, shared prefixes and ref counts, commit,
// free, eviction; plus the replay range of a hit and the admission edge cases.
#include "runtime/kv_cache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <map>

#include "kernels/check.h"
#include "kv_cache_test_util.h"

namespace troupe::runtime {
namespace {

using test::admit;
using test::concat;
using test::iota_tokens;
using test::to_vector;

enum class Op { Admit, Allocate, Commit, Free };

struct Step {
  Op op;
  RequestId id;
  int64_t n;                   // Admit/Allocate: total tokens; Commit: num_computed
  bool ok;                     // Admit/Allocate result
  std::vector<int32_t> table;  // id's table after the step (empty: id not admitted)
  int64_t free, cached, used;  // pool counts after the step
  std::optional<std::vector<int32_t>> lru = std::nullopt;  // LRU list, head first
  int64_t hit = 0;                                         // Admit: cached tokens granted
};

KvCacheConfig small_config() {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = 8, c.swa_slots = 3, c.window = 6;
  return c;
}

// Runs one step, asserting its result and the state after it; `trace` names the step.
void run_step(KvCacheManager& kv, const std::map<RequestId, std::vector<int32_t>>& tokens,
              const Step& s) {
  bool ok = true;
  int64_t hit = 0;
  switch (s.op) {
    case Op::Admit: {
      const auto adm = admit(kv, s.id, tokens.at(s.id), s.n);
      ok = adm.has_value();
      hit = adm ? adm->num_cached_tokens : 0;
      break;
    }
    case Op::Allocate:
      ok = kv.allocate(s.id, s.n);
      break;
    case Op::Commit:
      kv.commit_full_blocks(s.id, tokens.at(s.id), s.n);
      break;
    case Op::Free:
      kv.free(s.id);
      break;
  }
  EXPECT_EQ(ok, s.ok);
  EXPECT_EQ(hit, s.hit);
  EXPECT_EQ(kv.contains(s.id) ? to_vector(kv.block_table(s.id)) : std::vector<int32_t>{}, s.table);
  EXPECT_EQ(kv.num_free_blocks(), s.free);
  EXPECT_EQ(kv.num_cached_blocks(), s.cached);
  EXPECT_EQ(kv.num_used_blocks(), s.used);
  if (s.lru) {
    EXPECT_EQ(kv.pool().lru_order(), *s.lru);
  }
  kv.check_invariants();
}

TEST(KvCacheManager, StepTable) {
  KvCacheManager kv(small_config());
  // A and B share their first two blocks; C needs more blocks than exist at step 7.
  const std::map<RequestId, std::vector<int32_t>> tokens = {
      {1, iota_tokens(0, 14)},
      {2, concat(iota_tokens(0, 8), iota_tokens(100, 6))},
      {3, iota_tokens(200, 40)}};
  // op, id, n, ok, id's table after, free (ref 0, cached included), cached, used, LRU, hit
  const std::vector<Step> steps = {
      {Op::Admit, 1, 6, true, {0, 1}, 6, 0, 2, std::vector<int32_t>{2, 3, 4, 5, 6, 7}},
      {Op::Allocate, 1, 8, true, {0, 1}, 6, 0, 2},     // still fits in 2 blocks
      {Op::Allocate, 1, 9, true, {0, 1, 2}, 5, 0, 3},  // 9th token: a 3rd block
      {Op::Commit, 1, 9, true, {0, 1, 2}, 5, 0, 3},    // blocks 0, 1 published
      {Op::Allocate, 1, 14, true, {0, 1, 2, 3}, 4, 0, 4},
      {Op::Admit, 2, 14, true, {0, 1, 4, 5}, 2, 0, 6, std::nullopt, 8},  // hit [0, 8)
      {Op::Admit, 3, 40, false, {}, 2, 0, 6},                            // 10 blocks > 2 free
      {Op::Allocate, 2, 24, true, {0, 1, 4, 5, 6, 7}, 0, 0, 8},
      {Op::Allocate, 1, 17, false, {0, 1, 2, 3}, 0, 0, 8},  // out of blocks
      {Op::Commit, 1, 14, true, {0, 1, 2, 3}, 0, 0, 8},     // block 2 published
      // Tail first into the LRU list; 0 and 1 are still held by B.
      {Op::Free, 1, 0, true, {}, 2, 1, 6, std::vector<int32_t>{3, 2}},
      {Op::Free, 2, 0, true, {}, 8, 3, 0, std::vector<int32_t>{3, 2, 7, 6, 5, 4, 1, 0}},
      // C takes the whole pool in LRU order, evicting the 3 cached blocks.
      {Op::Admit, 3, 30, true, {3, 2, 7, 6, 5, 4, 1, 0}, 0, 0, 8, std::vector<int32_t>{}},
      {Op::Free, 3, 0, true, {}, 8, 0, 0, std::vector<int32_t>{0, 1, 4, 5, 6, 7, 2, 3}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    run_step(kv, tokens, steps[i]);
  }
  EXPECT_EQ(kv.pool().ref_count(0), 0);
  EXPECT_EQ(kv.stats().admissions, 3);
  EXPECT_EQ(kv.stats().prefix_hits, 1);
  EXPECT_EQ(kv.stats().hit_tokens, 8);
  EXPECT_EQ(kv.stats().query_tokens, 14 + 14 + 40);  // prompts of the 3 admitted requests
  EXPECT_EQ(kv.stats().evictions, 3);
}

TEST(KvCacheManager, RefCountsWhileSharing) {
  KvCacheManager kv(small_config());
  const auto a = iota_tokens(0, 9);
  ASSERT_TRUE(admit(kv, 1, a, 9));
  kv.commit_full_blocks(1, a, 9);
  ASSERT_TRUE(admit(kv, 2, a, 9));  // hit [0, 8): blocks 0 and 1
  ASSERT_TRUE(admit(kv, 3, a, 9));
  EXPECT_EQ(to_vector(kv.block_table(2)), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(to_vector(kv.block_table(3)), (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(kv.pool().ref_count(0), 3);
  EXPECT_EQ(kv.pool().ref_count(2), 1);  // A's partial block is private
  kv.free(2);
  EXPECT_EQ(kv.pool().ref_count(0), 2);
  kv.free(1);
  kv.free(3);
  EXPECT_EQ(kv.pool().ref_count(0), 0);
  EXPECT_EQ(kv.num_cached_blocks(), 2);
  kv.check_invariants();
}

TEST(KvCacheManager, RefusedCallsChangeNothing) {
  KvCacheManager kv(small_config());
  const auto a = iota_tokens(0, 16);
  const std::vector<RequestId> ids = {1, 2, 3, 4};
  ASSERT_TRUE(admit(kv, 1, a, 16));
  kv.commit_full_blocks(1, a, 16);
  kv.free(1);  // 4 cached blocks in the LRU list, 4 never used
  ASSERT_TRUE(admit(kv, 2, iota_tokens(50, 4), 4));
  auto before = test::snapshot(kv, ids);
  // A hit of 3 blocks (ref 0) + 3 new needs 6 of the 7 free; 5 new do not fit.
  EXPECT_FALSE(admit(kv, 3, a, 32));
  EXPECT_FALSE(kv.allocate(2, 4 * 9));
  EXPECT_EQ(test::snapshot(kv, ids), before);
  // Out of SWA slots (3): two more admissions fit, the third does not.
  ASSERT_TRUE(admit(kv, 3, iota_tokens(60, 1), 1));
  ASSERT_TRUE(admit(kv, 4, iota_tokens(70, 1), 1));
  before = test::snapshot(kv, ids);
  EXPECT_FALSE(admit(kv, 5, iota_tokens(80, 1), 1));
  EXPECT_EQ(test::snapshot(kv, ids), before);
  kv.check_invariants();
}

TEST(KvCacheManager, FreeAfterAbortMidPrefill) {
  KvCacheManager kv(small_config());
  const auto a = iota_tokens(0, 30);
  ASSERT_TRUE(admit(kv, 1, a, 12));  // first chunk
  kv.commit_full_blocks(1, a, 12);   // 3 full blocks published
  ASSERT_TRUE(kv.allocate(1, 22));   // second chunk, aborted before it ran
  kv.free(1);
  EXPECT_FALSE(kv.contains(1));
  EXPECT_EQ(kv.num_used_blocks(), 0);
  EXPECT_EQ(kv.num_cached_blocks(), 3);
  EXPECT_EQ(kv.num_free_swa_slots(), 3);
  kv.free(1);  // unknown id: no-op
  kv.check_invariants();
  EXPECT_EQ(kv.find_cached_prefix(a).num_tokens, 12);
}

TEST(KvCacheManager, LruEvictsOldestFreedFirstAndTailsBeforeHeads) {
  KvCacheConfig c = small_config();
  c.num_blocks = 6;
  KvCacheManager kv(c);
  const auto a = iota_tokens(0, 8), b = iota_tokens(100, 8);
  ASSERT_TRUE(admit(kv, 1, a, 8));  // blocks 0 1
  ASSERT_TRUE(admit(kv, 2, b, 8));  // blocks 2 3
  kv.commit_full_blocks(1, a, 8);
  kv.commit_full_blocks(2, b, 8);
  kv.free(1);  // LRU: 4 5 | 1 0
  kv.free(2);  // LRU: 4 5 1 0 | 3 2
  EXPECT_EQ(kv.pool().lru_order(), (std::vector<int32_t>{4, 5, 1, 0, 3, 2}));
  ASSERT_TRUE(admit(kv, 3, iota_tokens(200, 12), 12));  // 4 5 free, then evicts 1 (A's tail)
  EXPECT_EQ(to_vector(kv.block_table(3)), (std::vector<int32_t>{4, 5, 1}));
  EXPECT_EQ(kv.stats().evictions, 1);
  EXPECT_EQ(kv.find_cached_prefix(concat(a, {9})).num_tokens, 4);  // A's head survives
  EXPECT_EQ(kv.find_cached_prefix(concat(b, {9})).num_tokens, 8);
  // A hit refreshes recency: B's blocks leave the list while held, rejoin at the tail.
  ASSERT_TRUE(admit(kv, 4, concat(b, {9}), 9));
  kv.free(4);
  EXPECT_EQ(kv.pool().lru_order(), (std::vector<int32_t>{0, 3, 2}));
  kv.check_invariants();
}

struct ReplayCase {
  int64_t prompt_len, cached_len, window;
  bool has_window;
  int64_t want_hit, want_replay_from;
};

TEST(KvCacheManager, ReplayRangeOfAHit) {
  const std::vector<ReplayCase> cases = {
      // prompt, cached, W, carries window -> hit B, replay from max(0, B - W) or B
      {20, 16, 6, false, 16, 10}, {20, 16, 6, true, 16, 16},
      {20, 4, 6, false, 4, 0},     // window reaches past position 0
      {20, 16, 0, false, 16, 16},  // no window, nothing to replay
      {20, 0, 6, false, 0, 0},     // miss
      {16, 16, 6, false, 12, 6},   // fully cached: the last block is recomputed
      {17, 16, 6, false, 16, 10}, {1, 0, 6, false, 0, 0},
  };
  for (const ReplayCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "prompt " << c.prompt_len << " cached " << c.cached_len
                                    << " W " << c.window << " has_window " << c.has_window);
    KvCacheConfig cfg = small_config();
    cfg.window = c.window;
    KvCacheManager kv(cfg);
    const auto tokens = iota_tokens(7, c.prompt_len);
    if (c.cached_len > 0) {
      const auto prefix = iota_tokens(7, c.cached_len);
      ASSERT_TRUE(admit(kv, 1, prefix, c.cached_len));
      kv.commit_full_blocks(1, prefix, c.cached_len);
      kv.free(1);
    }
    const auto adm = admit(kv, 2, tokens, c.prompt_len, c.has_window);
    ASSERT_TRUE(adm);
    EXPECT_EQ(adm->num_cached_tokens, c.want_hit);
    EXPECT_EQ(adm->replay_from, c.want_replay_from);
    EXPECT_EQ(kv.stats().replay_tokens, c.want_hit - c.want_replay_from);
    kv.check_invariants();
  }
}

TEST(KvCacheManager, DisabledPrefixCacheNeverHits) {
  KvCacheConfig c = small_config();
  c.enable_prefix_cache = false;
  KvCacheManager kv(c);
  const auto a = iota_tokens(0, 9);
  ASSERT_TRUE(admit(kv, 1, a, 9));
  kv.commit_full_blocks(1, a, 9);
  kv.free(1);
  EXPECT_EQ(kv.num_cached_blocks(), 0);
  EXPECT_EQ(admit(kv, 2, a, 9)->num_cached_tokens, 0);
  kv.check_invariants();
}

TEST(KvCacheManager, StalePrefixAndBadCallsThrow) {
  KvCacheConfig c = small_config();
  c.num_blocks = 2;
  KvCacheManager kv(c);
  const auto a = iota_tokens(0, 5);
  ASSERT_TRUE(admit(kv, 1, a, 5));
  kv.commit_full_blocks(1, a, 5);
  kv.free(1);
  const CachedPrefix hit = kv.find_cached_prefix(a);
  ASSERT_EQ(hit.num_tokens, 4);
  ASSERT_TRUE(admit(kv, 2, iota_tokens(50, 8), 8));  // evicts the cached block
  EXPECT_THROW(kv.admit(3, hit, 5), Error);
  EXPECT_THROW(admit(kv, 2, a, 5), Error);                                 // already admitted
  EXPECT_THROW(kv.allocate(9, 4), Error);                                  // unknown
  EXPECT_THROW(kv.commit_full_blocks(2, iota_tokens(50, 8), 9), Error);    // past tokens
  EXPECT_THROW(kv.commit_full_blocks(2, iota_tokens(50, 12), 12), Error);  // past table
  KvCacheConfig bad = small_config();
  bad.num_blocks = 0;
  EXPECT_THROW(KvCacheManager{bad}, Error);
  kv.check_invariants();
}

}  // namespace
}  // namespace troupe::runtime
