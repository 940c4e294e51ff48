// Heap allocations per decode step on the Engine's hot path (issue 13, low-latency path),
// counted by replacing the global operator new in this test binary: every thread's
// allocations between two points. Engine::step(outputs) with the same outputs vector
// every step: plans, chunks, block tables, samples, outputs and the executor's per-step
// buffers are built once and updated in place, activations come from the threads'
// ScratchPools (kernels/scratch.h), parallel_for takes a FunctionRef and reuses its jobs
// (docs/dspark.md, "Low-latency path"). Before, a step made 2101 (batch 1) to 14788
// (batch 8, k = 3) allocations. What is left: a pool block the first time a buffer that
// grows with the context (the indexer's keys, the attention's key rows) outgrows its
// power-of-two size class on a thread, and, with the prefix cache on, the cache's
// hash-map node of each block that fills. Kernel chunks go to whichever thread claims
// them, so on a loaded machine a thread's pool may meet a class it has not held yet: the
// ceilings are kPoolSlack plus half an allocation per request per step (measured: at
// most 0.19 per request per step on a loaded 2-core box) beyond the filled blocks; the
// counts are printed. Before, a step made 900 to 1850 per request.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "runtime/speculative/dspark_drafter.h"
#include "support/golden.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::random_tokens;

constexpr int64_t kPoolSlack = 16;  // three threads' pools meeting a class for the first time

struct Counted {
  int64_t allocations = 0;
  int64_t blocks_filled = 0;  // blocks of block_size tokens completed during the steps
};

// Allocations over `steps` decode steps of `batch` requests, after every request has its
// first token and two more steps have run.
Counted count_decode_steps(int64_t batch, int64_t k, bool prefix_cache, int64_t steps) {
  EngineConfig c = golden_engine_config(int64_t(64) << 20, /*async=*/false, 8192, 16);
  c.executor.kernel_threads = 2;  // per-thread pools: a fixed thread count
  c.enable_prefix_cache = prefix_cache;
  const DsparkDrafter drafter(*golden_draft().draft);
  if (k > 0) {
    c.speculative.method = "dspark";
    c.speculative.num_speculative_tokens = k;
  }
  Engine e(*golden_draft().forward, nullptr, c, k > 0 ? &drafter : nullptr);
  for (int64_t b = 0; b < batch; ++b)
    e.add_request(b, random_tokens(20 + b, 900 + uint32_t(b)), greedy(steps + 8));
  std::vector<RequestOutput> out;  // the same every step: its buffers are recycled
  while (e.figures().running < batch || e.figures().waiting > 0) e.step(out);
  e.step(out);
  e.step(out);
  auto full_blocks = [&] {
    int64_t n = 0;
    for (int64_t b = 0; b < batch; ++b) n += e.scheduler().find(b)->num_computed_tokens / c.block_size;
    return n;
  };
  const int64_t blocks_before = full_blocks();
  g_allocations = 0;
  g_counting = true;
  for (int64_t s = 0; s < steps; ++s) e.step(out);
  g_counting = false;
  EXPECT_EQ(e.figures().running, batch) << "a request ended inside the counted steps";
  return {g_allocations.load(), full_blocks() - blocks_before};
}

TEST(DecodeAllocations, DecodeStepsAllocateAtMostHalfAPerRequest) {
  for (int64_t batch : {1, 8, 16}) {
    for (int64_t k : {0, 3}) {
      const int64_t steps = 8;
      const Counted n = count_decode_steps(batch, k, /*prefix_cache=*/false, steps);
      std::printf("decode allocations, prefix cache off: batch %lld, k %lld: %lld in %lld steps\n",
                  static_cast<long long>(batch), static_cast<long long>(k),
                  static_cast<long long>(n.allocations), static_cast<long long>(steps));
      EXPECT_LE(n.allocations, kPoolSlack + batch * steps / 2) << "batch " << batch << ", k " << k;
    }
  }
}

TEST(DecodeAllocations, PrefixCacheAddsAtMostItsFilledBlocks) {
  for (int64_t batch : {1, 8}) {
    for (int64_t k : {0, 3}) {
      const Counted n = count_decode_steps(batch, k, /*prefix_cache=*/true, 8);
      std::printf("decode allocations, prefix cache on: batch %lld, k %lld: %lld in 8 steps, "
                  "%lld blocks filled\n",
                  static_cast<long long>(batch), static_cast<long long>(k),
                  static_cast<long long>(n.allocations), static_cast<long long>(n.blocks_filled));
      EXPECT_LE(n.allocations, kPoolSlack + n.blocks_filled + batch * 8 / 2) << "batch " << batch << ", k " << k;
    }
  }
}

// The counter sees allocations at all (else the tests above would pass vacuously).
TEST(DecodeAllocations, CounterSeesAllocations) {
  g_allocations = 0;
  g_counting = true;
  auto* v = new std::vector<int>(3);
  g_counting = false;
  delete v;
  EXPECT_EQ(g_allocations.load(), 2);  // the vector object and its buffer
}

}  // namespace
}  // namespace troupe::runtime
