// Execution contexts: each has its own workers, a thread's binding decides which one
// parallel_for uses, and every index is still covered exactly once.
#include "kernels/exec_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace troupe::kernels {
namespace {

// Runs parallel_for over n on the calling thread's context; returns the ids of the threads
// that ran chunks and checks each index was visited once.
std::set<std::thread::id> threads_used(int64_t n) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) visits[size_t(i)].fetch_add(1);
    // Long enough that the context's workers wake up and claim chunks too.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < until) {
    }
    std::lock_guard lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(visits[size_t(i)].load(), 1) << "index " << i;
  return ids;
}

// Chunks shrink as the range runs out (guided): whatever the thread count, every index is
// covered once, every chunk but a range's last is a whole multiple of min_chunk (kernels
// ask for tile multiples), and no chunk is shorter than min_chunk unless it ends the range.
TEST(ExecContext, ChunksCoverTheRangeOnceInMultiplesOfTheMinimum) {
  for (int threads : {1, 2, 3, 5})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{100}, int64_t{1000}, int64_t{4097}})
      for (int64_t min_chunk : {int64_t{1}, int64_t{3}, int64_t{128}}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, n " + std::to_string(n) + ", min " +
                     std::to_string(min_chunk));
        ExecContext ctx(threads);
        std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        ctx.parallel_for(n, min_chunk, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) visits[size_t(i)].fetch_add(1);
          std::lock_guard lock(mu);
          chunks.emplace_back(begin, end);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[size_t(i)].load(), 1) << "index " << i;
        for (auto [begin, end] : chunks) {
          ASSERT_LT(begin, end);
          if (end < n) {
            EXPECT_EQ((end - begin) % min_chunk, 0) << "chunk [" << begin << ", " << end << ")";
          } else {
            EXPECT_TRUE(end - begin >= min_chunk || begin % min_chunk == 0)
                << "last chunk [" << begin << ", " << end << ")";
          }
        }
      }
}

TEST(ExecContext, BindingDecidesTheThreadCount) {
  ExecContext three(3), one(1);
  {
    ScopedExecContext bind(three);
    EXPECT_EQ(num_threads(), 3);
    {
      ScopedExecContext inner(one);
      EXPECT_EQ(num_threads(), 1);
      EXPECT_EQ(threads_used(64).size(), 1u);  // inline on the caller
    }
    EXPECT_EQ(num_threads(), 3);  // the outer binding is back
  }
  EXPECT_EQ(num_threads(), default_num_threads());
}

TEST(ExecContext, TwoRanksRunOnDisjointWorkers) {
  ExecContext a(3), b(3);
  std::set<std::thread::id> seen_a, seen_b;
  // Two "ranks" run kernels at the same time, each on its own context.
  std::thread ta([&] {
    ScopedExecContext bind(a);
    for (int k = 0; k < 20; ++k)
      for (auto id : threads_used(256)) seen_a.insert(id);
  });
  std::thread tb([&] {
    ScopedExecContext bind(b);
    for (int k = 0; k < 20; ++k)
      for (auto id : threads_used(256)) seen_b.insert(id);
  });
  ta.join();
  tb.join();
  for (auto id : seen_a) EXPECT_EQ(seen_b.count(id), 0u) << "a thread ran chunks of both contexts";
  EXPECT_LE(seen_a.size(), 3u);  // the caller + at most 2 workers
  EXPECT_LE(seen_b.size(), 3u);
}

TEST(ExecContext, APinnedBackendHoldsOnlyWhereTheContextIsBound) {
  ExecContext ref_rank(1);
  ref_rank.set_backend(Backend::Ref);
  Backend seen_bound = Backend::Cpu, seen_other = Backend::Ref;
  std::thread a([&] {
    ScopedExecContext bind(ref_rank);
    seen_bound = active_backend();
  });
  std::thread b([&] { seen_other = active_backend(); });
  a.join();
  b.join();
  EXPECT_EQ(seen_bound, Backend::Ref);
  EXPECT_EQ(seen_other, Backend::Cpu);  // the process-wide default
  ExecContext unpinned(1);
  ScopedExecContext bind(unpinned);
  EXPECT_EQ(active_backend(), Backend::Cpu);
}

}  // namespace
}  // namespace troupe::kernels
