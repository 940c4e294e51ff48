// BlockPool and block_hash: hash chaining, hit verification against token ids (forced
// collisions are misses), the LRU list and its counters; and the budget arithmetic of
// kv_cache_config against hand-worked figures.
#include <gtest/gtest.h>

#include <set>

#include "kernels/check.h"
#include "kv_cache_test_util.h"
#include "model/config.h"
#include "runtime/kv_cache/block_hash.h"
#include "runtime/kv_cache/block_pool.h"
#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::runtime {
namespace {

using test::admit;
using test::concat;
using test::iota_tokens;

TEST(KvBlockHash, ChainsOverParentAndEveryToken) {
  for (int64_t n : {1, 2, 3, 7, 8, 9, 16, 17, 31, 33, 64, 100}) {
    SCOPED_TRACE(n);
    const auto t = iota_tokens(1000, n);
    const uint64_t h = block_hash(kRootBlockHash, t);
    EXPECT_EQ(h, block_hash(kRootBlockHash, t));
    EXPECT_NE(h, block_hash(h, t));  // same tokens, different parent
    EXPECT_NE(h, block_hash(kRootBlockHash, std::span(t).first(size_t(n - 1))));
    for (int64_t i = 0; i < n; ++i) {  // any single token changes the hash
      auto u = t;
      u[size_t(i)] ^= 1 << (i % 31);
      EXPECT_NE(h, block_hash(kRootBlockHash, u)) << "token " << i;
    }
  }
}

TEST(KvBlockHash, NoCollisionsOnManySimilarBlocks) {
  std::set<uint64_t> seen;
  auto t = iota_tokens(0, 64);
  for (int32_t i = 0; i < 20000; ++i) {
    t[size_t(i % 64)] = 1000000 + i;  // neighbours differ in one token
    ASSERT_TRUE(seen.insert(block_hash(kRootBlockHash, t)).second) << i;
  }
}

TEST(KvBlockPool, SameTokensUnderDifferentParentsAreDifferentBlocks) {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = 8, c.swa_slots = 2;
  KvCacheManager kv(c);
  const auto shared = iota_tokens(500, 4);
  const auto x = concat(iota_tokens(0, 4), shared), y = concat(iota_tokens(10, 4), shared);
  ASSERT_TRUE(admit(kv, 1, x, 8));
  kv.commit_full_blocks(1, x, 8);
  EXPECT_EQ(kv.find_cached_prefix(concat(y, {1})).num_tokens, 0);
  EXPECT_EQ(kv.find_cached_prefix(concat(x, {1})).num_tokens, 8);
}

uint64_t constant_hash(uint64_t, std::span<const int32_t>) {
  return 42;
}

TEST(KvBlockPool, ForcedCollisionIsAMiss) {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = 8, c.swa_slots = 3, c.hash_fn = constant_hash;
  KvCacheManager kv(c);
  const auto a = iota_tokens(0, 9), b = iota_tokens(100, 9);
  ASSERT_TRUE(admit(kv, 1, a, 9));
  kv.commit_full_blocks(1, a, 9);  // block 0 takes hash 42; block 1 finds it taken
  EXPECT_TRUE(kv.pool().is_hashed(0));
  EXPECT_FALSE(kv.pool().is_hashed(1));
  EXPECT_EQ(admit(kv, 2, b, 9)->num_cached_tokens, 0);  // same hash, other tokens
  // Same tokens: block 0 verifies; block 1 would need parent 42 but 42 names block 0.
  EXPECT_EQ(admit(kv, 3, a, 9)->num_cached_tokens, 4);
  kv.check_invariants();
}

TEST(KvBlockPool, LookupVerifiesParentAndTokens) {
  BlockPool pool(4, 2);
  std::vector<int32_t> got;
  ASSERT_EQ(pool.take(2, got), 0);
  const std::vector<int32_t> t = {5, 6};
  ASSERT_TRUE(pool.publish(got[0], 77, 1, t));
  EXPECT_FALSE(pool.publish(got[1], 77, 1, t));  // hash taken: stays private
  EXPECT_EQ(pool.lookup(77, 1, t), got[0]);
  EXPECT_EQ(pool.lookup(77, 2, t), -1);                           // other parent
  EXPECT_EQ(pool.lookup(77, 1, std::vector<int32_t>{5, 7}), -1);  // other tokens
  EXPECT_EQ(pool.lookup(78, 1, t), -1);
  pool.check_invariants();
}

TEST(KvBlockPool, TakeRefUnrefAndCounters) {
  BlockPool pool(5, 1);
  std::vector<int32_t> got;
  EXPECT_EQ(pool.take(6, got), -1);
  EXPECT_TRUE(got.empty());
  ASSERT_EQ(pool.take(3, got), 0);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(pool.publish(1, 9, 0, std::vector<int32_t>{3}));
  pool.unref(2), pool.unref(1);
  EXPECT_EQ(pool.lru_order(), (std::vector<int32_t>{3, 4, 2, 1}));
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached_free(), 1);
  pool.ref(1);  // a hit
  EXPECT_EQ(pool.lru_order(), (std::vector<int32_t>{3, 4, 2}));
  EXPECT_EQ(pool.num_cached_free(), 0);
  pool.unref(1);
  got.clear();
  EXPECT_EQ(pool.take(4, got), 1);  // 3 4 2 then 1, evicted
  EXPECT_EQ(got, (std::vector<int32_t>{3, 4, 2, 1}));
  EXPECT_FALSE(pool.is_hashed(1));
  EXPECT_EQ(pool.lookup(9, 0, std::vector<int32_t>{3}), -1);
  EXPECT_THROW(BlockPool(2, 1).unref(0), Error);
  pool.check_invariants();
}

TEST(KvCacheBudget, FlashFiguresByHand) {
  const model::ModelConfig flash = model::preset_config("v41-flash");
  const int64_t budget = int64_t(64) << 30;  // 64 GiB
  const KvCacheBudget b = plan_kv_budget(flash, budget, 256);
  EXPECT_EQ(b.kv_bytes_per_token, 890.0);
  EXPECT_EQ(b.bytes_per_block, 64 * 890);  // 56,960
  // SWA 40*128*528 + DSpark 128*5120*4 + 3*128*512*4 + compressor 3*4096
  EXPECT_EQ(b.request_state_bytes, 2703360 + 2621440 + 786432 + 12288);
  EXPECT_EQ(b.reserved_bytes, int64_t(256) * 6123520);
  EXPECT_EQ(b.num_blocks, (budget - int64_t(256) * 6123520) / 56960);
  EXPECT_EQ(b.num_blocks, 1178930);
  const KvCacheConfig c = kv_cache_config_for(flash, budget, 256);
  EXPECT_EQ(c.num_blocks, 1178930);
  EXPECT_EQ(c.swa_slots, 256);
  EXPECT_EQ(c.window, 128);
}

TEST(KvCacheBudget, RejectsBadSizes) {
  const model::ModelConfig tiny = model::preset_config("v41-tiny");
  EXPECT_THROW(plan_kv_budget(tiny, 1000, 4), Error);  // under the reservation
  EXPECT_THROW(plan_kv_budget(tiny, int64_t(1) << 30, 0), Error);
  EXPECT_THROW(plan_kv_budget(tiny, int64_t(1) << 30, 4, 3), Error);  // ratio 2 does not divide 3
  const KvCacheBudget b = plan_kv_budget(tiny, int64_t(1) << 20, 1);
  EXPECT_EQ(b.bytes_per_block, 64 * 212);
  EXPECT_EQ(b.num_blocks, ((int64_t(1) << 20) - b.request_state_bytes) / (64 * 212));
}

}  // namespace
}  // namespace troupe::runtime
