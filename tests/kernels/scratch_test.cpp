// ScratchPool (kernels/scratch.h): freed blocks come back for requests of their size
// class on the same thread, so a repeated pattern stops taking fresh blocks; and
// FunctionRef (kernels/function_ref.h) calls what it refers to.
#include <gtest/gtest.h>

#include <thread>

#include "kernels/function_ref.h"
#include "kernels/scratch.h"

namespace troupe::kernels {
namespace {

TEST(ScratchPool, FreedBlockIsHandedOutAgainForItsClass) {
  ScratchPool pool;
  void* a = pool.allocate(1000);  // class 1024 B
  pool.deallocate(a, 1000);
  EXPECT_EQ(pool.allocate(600), a);  // 513..1024 B: the same class, the same block
  void* b = pool.allocate(1000);     // the class's list is empty now
  EXPECT_NE(b, a);
  EXPECT_EQ(pool.fresh_blocks(), 2);
  pool.deallocate(a, 600);
  pool.deallocate(b, 1000);
  void* c = pool.allocate(2000);  // another class takes a fresh block
  EXPECT_NE(c, a);
  EXPECT_EQ(pool.fresh_blocks(), 3);
  pool.deallocate(c, 2000);
}

TEST(ScratchPool, RepeatedPatternTakesNoFreshBlocks) {
  ScratchPool pool;
  auto round = [&] {
    void* p[3] = {pool.allocate(64), pool.allocate(4096), pool.allocate(100000)};
    pool.deallocate(p[1], 4096);
    pool.deallocate(p[0], 64);
    pool.deallocate(p[2], 100000);
  };
  round();
  const int64_t warm = pool.fresh_blocks();
  for (int i = 0; i < 10; ++i) round();
  EXPECT_EQ(pool.fresh_blocks(), warm);
  EXPECT_EQ(warm, 3);
}

// A pool of one's own ending leaves the thread's pool working (it once switched the
// thread to system allocations for good).
TEST(ScratchPool, OwnPoolsEndingKeepTheThreadsPool) {
  { ScratchPool own; }
  void* p = scratch_allocate(128);
  scratch_deallocate(p, 128);
  EXPECT_EQ(scratch_allocate(100), p);  // pooled: the same block again
  scratch_deallocate(p, 100);
}

TEST(ScratchPool, LargeBlocksBypassThePool) {
  ScratchPool pool;
  const size_t big = ScratchPool::kMaxPooledBytes + 1;
  void* p = pool.allocate(big);
  pool.deallocate(p, big);
  EXPECT_EQ(pool.fresh_blocks(), 0);  // not a pool block, and not kept
}

// The cap counts what the kept blocks hold (their classes), not what was asked for: with
// 200 MiB kept, a block asked as 32 MiB + 1 (a 64 MiB block) would pass it, so it goes
// back to the system: of four 64 MiB requests after, three take kept blocks, one a fresh.
TEST(ScratchPool, TheCapCountsTheBlocksClasses) {
  ScratchPool pool;
  constexpr size_t MiB = size_t{1} << 20;
  static_assert(ScratchPool::kMaxCachedBytes == 256 * MiB);
  void* kept[4] = {pool.allocate(64 * MiB), pool.allocate(64 * MiB), pool.allocate(64 * MiB),
                   pool.allocate(8 * MiB)};
  void* past = pool.allocate(32 * MiB + 1);
  for (int i = 0; i < 3; ++i) pool.deallocate(kept[i], 64 * MiB);
  pool.deallocate(kept[3], 8 * MiB);  // 200 MiB kept
  pool.deallocate(past, 32 * MiB + 1);
  const int64_t fresh = pool.fresh_blocks();
  void* again[4];
  for (void*& p : again) p = pool.allocate(64 * MiB);
  EXPECT_EQ(pool.fresh_blocks(), fresh + 1);
  for (void* p : again) pool.deallocate(p, 64 * MiB);
  pool.deallocate(pool.allocate(8 * MiB), 8 * MiB);
}

TEST(ScratchVector, BehavesAsAVectorAcrossThreads) {
  scratch_vector<int> v(5, 7);
  v.push_back(8);
  EXPECT_EQ(v.size(), 6u);
  EXPECT_EQ(v[5], 8);
  // A vector freed on another thread goes to that thread's pool, intact.
  std::thread([w = std::move(v)]() mutable {
    EXPECT_EQ(w[0], 7);
    w.clear();
    w.shrink_to_fit();
  }).join();
}

TEST(FunctionRef, CallsTheReferredCallable) {
  int calls = 0;
  auto add = [&](int64_t a, int64_t b) { calls += static_cast<int>(b - a); };
  const FunctionRef<void(int64_t, int64_t)> f = add;
  f(2, 5);
  f(0, 1);
  EXPECT_EQ(calls, 4);
}

}  // namespace
}  // namespace troupe::kernels
