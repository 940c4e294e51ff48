// KvCacheManager::fork (n > 1 siblings share the prompt's KV) and the byte copies the
// executor does for it (PagedKvStorage::copy_slot / copy_block): shared full blocks get
// one more ref, the partial block a private copy, the child a slot; a fork that does not
// fit changes nothing; freeing every member leaves no block or slot behind.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/check.h"
#include "kv_cache_test_util.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/paged_kv.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using test::admit;
using test::iota_tokens;
using test::snapshot;
using test::to_vector;

KvCacheConfig config(int64_t num_blocks, int64_t slots) {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = num_blocks, c.swa_slots = slots, c.window = 6;
  return c;
}

struct ForkCase {
  int64_t prompt;  // tokens the parent holds (and the child continues from)
  int64_t shared;  // full blocks shared
  bool partial;    // a partial last block to copy
};

class KvFork : public ::testing::TestWithParam<ForkCase> {};

TEST_P(KvFork, SharesFullBlocksAndCopiesThePartialOne) {
  const ForkCase fc = GetParam();
  KvCacheManager kv(config(8, 4));
  const auto prompt = iota_tokens(100, fc.prompt);
  ASSERT_TRUE(admit(kv, 1, prompt, fc.prompt));
  const auto parent = to_vector(kv.block_table(1));
  const int64_t used = kv.num_used_blocks();
  const auto f = kv.fork(1, 2, fc.prompt);
  ASSERT_TRUE(f);
  const auto child = to_vector(kv.block_table(2));
  ASSERT_EQ(int64_t(child.size()), kv.blocks_for(fc.prompt));
  for (int64_t i = 0; i < fc.shared; ++i) {
    EXPECT_EQ(child[i], parent[i]) << "block " << i;
    EXPECT_EQ(kv.pool().ref_count(parent[i]), 2) << "block " << i;
  }
  EXPECT_EQ(kv.num_used_blocks(), used + (fc.partial ? 1 : 0));
  if (fc.partial) {
    EXPECT_EQ(f->src_block, parent.back());
    EXPECT_EQ(f->dst_block, child.back());
    EXPECT_NE(f->dst_block, f->src_block);
    EXPECT_EQ(kv.pool().ref_count(f->dst_block), 1);
    EXPECT_EQ(kv.pool().ref_count(f->src_block), 1);
  } else {
    EXPECT_EQ(f->src_block, -1);
    EXPECT_EQ(f->dst_block, -1);
  }
  EXPECT_NE(f->swa_slot, kv.swa_slot(1));
  EXPECT_EQ(f->swa_slot, kv.swa_slot(2));
  kv.check_invariants();
  // Both grow on their own after the fork.
  ASSERT_TRUE(kv.allocate(2, fc.prompt + 5));
  ASSERT_TRUE(kv.allocate(1, fc.prompt + 1));
  kv.check_invariants();
  kv.free(1);
  kv.check_invariants();
  kv.free(2);
  kv.check_invariants();
  EXPECT_EQ(kv.num_used_blocks(), 0);
  EXPECT_EQ(kv.num_free_swa_slots(), 4);
}

INSTANTIATE_TEST_SUITE_P(Sizes, KvFork,
                         ::testing::Values(ForkCase{1, 0, true}, ForkCase{3, 0, true},
                                           ForkCase{4, 1, false}, ForkCase{9, 2, true},
                                           ForkCase{17, 4, true}, ForkCase{16, 4, false}));

TEST(KvFork, NoSlotOrNoBlockChangesNothing) {
  KvCacheManager kv(config(3, 2));
  const auto prompt = iota_tokens(7, 9);  // 3 blocks: the pool is full
  ASSERT_TRUE(admit(kv, 1, prompt, 9));
  const RequestId ids[] = {1, 2};
  const auto before = snapshot(kv, ids);
  EXPECT_FALSE(kv.fork(1, 2, 9));  // the partial block needs a free one
  EXPECT_EQ(snapshot(kv, ids), before);
  EXPECT_TRUE(kv.fork(1, 2, 8));  // block aligned: nothing to copy, a slot is enough
  const RequestId ids3[] = {1, 2, 3};
  const auto full = snapshot(kv, ids3);
  EXPECT_FALSE(kv.fork(1, 3, 8));  // no slot left
  EXPECT_EQ(snapshot(kv, ids3), full);
  kv.check_invariants();
  EXPECT_THROW(kv.fork(1, 2, 8), troupe::Error);   // child already known
  EXPECT_THROW(kv.fork(9, 4, 8), troupe::Error);   // unknown parent
  EXPECT_THROW(kv.fork(1, 4, 13), troupe::Error);  // past the parent's table
}

// The shared blocks count as committed for the child: the leader publishes them, and a
// later request with the prompt hits them after both are gone.
TEST(KvFork, SharedBlocksArePublishedOnceAndStayCached) {
  KvCacheManager kv(config(8, 3));
  const auto prompt = iota_tokens(40, 10);
  ASSERT_TRUE(admit(kv, 1, prompt, 10));
  ASSERT_TRUE(kv.fork(1, 2, 10));
  kv.commit_full_blocks(1, prompt, 10);
  kv.commit_full_blocks(2, prompt, 10);  // no second publish (would throw)
  kv.free(2);
  kv.free(1);
  kv.check_invariants();
  EXPECT_EQ(kv.num_cached_blocks(), 2);
  EXPECT_EQ(kv.find_cached_prefix(prompt).num_tokens, 8);
}

TEST(PagedKvCopy, SlotAndBlockCopiesAreExact) {
  const auto& g = testing::golden_model();
  PagedKvStorage st(g.config, 16, 4, 3);
  const int64_t layers = st.layers(), W = g.config.sliding_window;
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t s = 0; s < W; ++s) {
      st.window_pos(1, l, s) = 100 * l + s;
      for (int64_t b = 0; b < st.rows().window.bytes(); ++b)
        st.window_row(1, l, s)[b] = uint8_t(l * 31 + s * 7 + b);
    }
    st.carry_v(1, l) = {float(l), 2.0f};
    st.carry_s(1, l) = {-float(l)};
  }
  st.reset_slot(2);
  st.carry_v(2, 0) = {9.0f, 9.0f, 9.0f};  // stale state the copy must replace
  st.copy_slot(1, 2);
  for (int64_t l = 0; l < layers; ++l) {
    EXPECT_EQ(st.carry_v(2, l), st.carry_v(1, l));
    EXPECT_EQ(st.carry_s(2, l), st.carry_s(1, l));
    for (int64_t s = 0; s < W; ++s) {
      ASSERT_EQ(st.window_pos(2, l, s), 100 * l + s);
      ASSERT_EQ(0, std::memcmp(st.window_row(2, l, s), st.window_row(1, l, s),
                               size_t(st.rows().window.bytes())));
    }
  }
  EXPECT_EQ(st.window_pos(0, 0, 0), -1);  // other slots untouched
  for (int64_t l = 0; l < layers; ++l) {
    if (g.config.layer_mode[l] != model::LayerMode::Full) continue;
    for (int64_t j = 0; j < 16 / st.ratio(l); ++j)
      for (int64_t b = 0; b < st.rows().ckv.bytes(); ++b) st.ckv_row(2, l, j)[b] = uint8_t(b + j);
  }
  st.copy_block(2, 3);
  for (int64_t l = 0; l < layers; ++l) {
    if (g.config.layer_mode[l] != model::LayerMode::Full) continue;
    for (int64_t j = 0; j < 16 / st.ratio(l); ++j) {
      ASSERT_EQ(
          0, std::memcmp(st.ckv_row(3, l, j), st.ckv_row(2, l, j), size_t(st.rows().ckv.bytes())));
      ASSERT_EQ(0, std::memcmp(st.ikey_row(3, l, j), st.ikey_row(2, l, j),
                               size_t(st.rows().ikey.bytes())));
    }
  }
}

}  // namespace
}  // namespace troupe::runtime
