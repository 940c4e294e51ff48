// Heap allocations per decode step on the Engine's hot path (issue 13, low-latency path),
// counted by replacing the global operator new in this test binary: every thread's
// allocations between two points. Engine::step(outputs) with the same outputs vector
// every step: plans, chunks, block tables, samples, outputs and the executor's per-step
// buffers are built once and updated in place, activations come from the threads'
// ScratchPools (kernels/scratch.h), parallel_for takes a FunctionRef and reuses its jobs
// (docs/dspark.md, "Low-latency path"). Before, a step made 2101 (batch 1) to 14788
// (batch 8, k = 3) allocations. A steady step (kWarmSteps in) makes none: with one kernel
// thread exactly none; with two, a thread may still meet a size class for the first time
// on a loaded machine (kPoolSlack); with the prefix cache on, each block that fills adds
// the cache's hash-map node. The counts are printed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <utility>

#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "runtime/speculative/dspark_drafter.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/golden.h"
#include "support/llama_ref.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

// The replacements pair malloc with free, which GCC 12 cannot see through once it inlines
// them into a delete of a new'd object (-Wmismatched-new-delete, a false positive here).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
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
#pragma GCC diagnostic pop

namespace troupe::runtime {
namespace {

using testing::golden_draft;

// Steps run before counting: every request has its first token, every kernel thread has
// run chunks of every kernel (its pool holds a block of each size class a step uses) and
// the buffers of each sequence's selected compressed rows have settled at (k + 1) ·
// index_topk rows (attention_layer.cpp, DecodedRows: 64 at k = 3, reached once a context
// holds more than 32 compressed rows; the tiny model compresses 2:1 at most, and the
// prompts are 20-35 tokens). Before that they take a block of the next size class each
// time the context doubles: a few per request, not per step.
constexpr int64_t kWarmSteps = 48;
// Steps counted: more than the 21 steps of a deque node, so a container that takes a node
// now and then (as recent_steps did) shows up.
constexpr int64_t kCountedSteps = 32;
// With two kernel threads, chunks go to whichever thread claims them: on a loaded machine
// a thread may still meet a size class for the first time.
constexpr int64_t kPoolSlack = 4;

struct Counted {
  int64_t allocations = 0;
  int64_t blocks_filled = 0;  // blocks of block_size tokens completed during the steps
};

// What the counted engine serves: a model, the draft for k > 0, and its prompt token range.
struct Served {
  const model::BatchForward* forward;
  const Drafter* drafter;  // null: no speculation
  int32_t min_token, max_token;
};

Served golden_served() {
  static const DsparkDrafter drafter(*golden_draft().draft);
  return {golden_draft().forward.get(), &drafter, 5, 4094};
}

// Allocations over kCountedSteps decode steps of `batch` requests, after kWarmSteps.
Counted count_decode_steps(const Served& m, int64_t batch, int64_t k, bool prefix_cache, int kernel_threads) {
  EngineConfig c = golden_engine_config(int64_t(64) << 20, /*async=*/false, 8192, 16);
  c.executor.kernel_threads = kernel_threads;  // per-thread pools: a fixed thread count
  c.enable_prefix_cache = prefix_cache;
  if (k > 0) {
    c.speculative.method = "dspark";
    c.speculative.num_speculative_tokens = k;
  }
  Engine e(*m.forward, nullptr, c, k > 0 ? m.drafter : nullptr);
  const int64_t most_tokens = (k + 1) * (kWarmSteps + kCountedSteps + 8);
  for (int64_t b = 0; b < batch; ++b) {
    std::mt19937 rng(900 + uint32_t(b));
    std::uniform_int_distribution<int32_t> token(m.min_token, m.max_token);
    std::vector<int32_t> prompt(size_t(20 + b));
    for (int32_t& t : prompt) t = token(rng);
    e.add_request(b, prompt, greedy(most_tokens));
  }
  std::vector<RequestOutput> out;  // the same every step: its buffers are recycled
  while (e.figures().running < batch || e.figures().waiting > 0) e.step(out);
  for (int64_t s = 0; s < kWarmSteps; ++s) e.step(out);
  auto full_blocks = [&] {
    int64_t n = 0;
    for (int64_t b = 0; b < batch; ++b) n += e.scheduler().find(b)->num_computed_tokens / c.block_size;
    return n;
  };
  const int64_t blocks_before = full_blocks();
  g_allocations = 0;
  g_counting = true;
  for (int64_t s = 0; s < kCountedSteps; ++s) e.step(out);
  g_counting = false;
  EXPECT_EQ(e.figures().running, batch) << "a request ended inside the counted steps";
  return {g_allocations.load(), full_blocks() - blocks_before};
}

// Every batch, k (0 only without a draft) and prefix-cache setting with `kernel_threads`:
// at most `ceiling` allocations in the counted steps; the counts are printed.
void expect_at_most(const char* model, const Served& m, int kernel_threads, int64_t ceiling) {
  for (bool prefix_cache : {false, true}) {
    for (int64_t batch : {1, 8, 16}) {
      for (int64_t k : {0, 3}) {
        if (k > 0 && m.drafter == nullptr) continue;
        const Counted n = count_decode_steps(m, batch, k, prefix_cache, kernel_threads);
        std::printf("decode allocations, %s, %d kernel thread(s), prefix cache %s: batch %lld, k %lld: %lld in "
                    "%lld steps, %lld blocks filled\n",
                    model, kernel_threads, prefix_cache ? "on" : "off", static_cast<long long>(batch),
                    static_cast<long long>(k), static_cast<long long>(n.allocations),
                    static_cast<long long>(kCountedSteps), static_cast<long long>(n.blocks_filled));
        EXPECT_LE(n.allocations, ceiling) << model << ", batch " << batch << ", k " << k << ", prefix cache "
                                          << prefix_cache;
        EXPECT_GT(n.blocks_filled, 0) << "the counted steps must fill blocks (publishing is counted)";
      }
    }
  }
}

// One kernel thread: which thread runs a chunk is fixed, so a steady step takes exactly
// the blocks it freed the step before. With the prefix cache on, each block that fills
// is published into a hash map allocated up front (runtime/kv_cache/block_hash_map.h).
TEST(DecodeAllocations, OneThreadDecodeStepsAllocateNothing) { expect_at_most("v41 tiny", golden_served(), 1, 0); }

TEST(DecodeAllocations, TwoThreadDecodeStepsAllocateAtMostAFirstMeeting) {
  expect_at_most("v41 tiny", golden_served(), 2, kPoolSlack);
}

// The LLaMA family on the same Engine (issue 15): a dense f32 and a Mixtral-style q8_0
// file the test writes. Its attention reads every earlier position, through row pointers
// the step gathers for all keys of the batch (model/llama_forward.cpp): those arrays grow
// with the contexts and take a block of the next size class when the batch's summed
// context passes a power of two (K and V: two blocks; at most once in the counted steps
// here). Nothing else allocates.
constexpr int64_t kContextGrowth = 2;

TEST(DecodeAllocations, LlamaDecodeStepsAllocateOnlyAsTheContextsDouble) {
  for (const auto& [name, experts] : {std::pair{"llama dense f32", 0}, std::pair{"llama moe q8_0 top-2 of 8", 8}}) {
    testing::TinyLlamaSpec spec;
    spec.type = experts > 0 ? model::GgmlType::Q8_0 : model::GgmlType::F32;
    spec.experts = experts;
    spec.top_k = experts > 0 ? 2 : 0;
    spec.context = 4096;
    test::TempDir dir;
    testing::write_tiny_llama(spec, dir.file("m.gguf"));
    const auto m = model::LlamaModel::load(dir.file("m.gguf"));
    expect_at_most(name, {m->forward.get(), nullptr, 3, int32_t(spec.vocab) - 1}, 1, kContextGrowth);
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
