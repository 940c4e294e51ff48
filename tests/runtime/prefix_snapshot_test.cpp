// SWA window snapshots (issue 14, docs/kv-cache.md "Window snapshots"): a request that
// ends leaves its rings at its last block boundary with that block in the prefix cache; a
// later hit exactly there restores them and replays nothing. Its logits (compared as
// the full-vocabulary logprobs the engine returns, bit for bit) equal those of the
// earlier request's own state extended in place with the new tokens, computed here on the
// plain contiguous SequenceState, and under full compute a cold run's too. A hit
// elsewhere falls back to exact replay and equals the cold run. Bookkeeping: snapshots
// are evicted with their block, and their bytes come out of the KV budget.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "kernels/sampling.h"
#include "model/footprint.h"
#include "runtime/engine.h"
#include "runtime/executor/logprobs.h"
#include "runtime/golden_engine_config.h"
#include "runtime/greedy_reference.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;
using testing::random_tokens;

using Out = GreedyOut;

EngineConfig snapshot_engine(bool bounded_replay, bool snapshots, bool prefix_cache = true) {
  // 48 tokens per step: chunked prefill; 16-token blocks.
  EngineConfig c = golden_engine_config(64 << 20, EngineConfig{}.async_scheduling, 48, 4);
  c.enable_prefix_cache = prefix_cache;
  c.enable_prefix_snapshots = snapshots;
  c.executor.bounded_replay = bounded_replay;
  c.executor.prefix_replay = PrefixReplay::Exact;
  return c;
}

RequestParams greedy_with_logprobs(int64_t max_tokens) {
  RequestParams p = greedy(max_tokens);
  p.num_logprobs = static_cast<int32_t>(golden_model().config.vocab_size);  // every logit
  return p;
}

Out run_one(Engine& e, RequestId id, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  e.add_request(id, prompt, greedy_with_logprobs(max_tokens));
  Out out;
  for (int n = 0; e.has_unfinished() && n < 2000; ++n) {
    for (const RequestOutput& o : e.step()) {
      out.tokens.insert(out.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      out.logprobs.insert(out.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
    e.kv_cache().check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  return out;
}

// The earlier request's state at `boundary`, as it computed it: its prompt in one prefill
// (decoder tail of its own prompt under bounded replay), then its outputs one decode each.
model::SequenceState earlier_state(const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& output, int64_t boundary,
                                   bool bounded) {
  const auto& g = golden_model();
  const int64_t E = static_cast<int64_t>(prompt.size()), R = g.config.replay_tokens;
  model::SequenceState st = model::SequenceState::empty(g.config);
  const int64_t prefill = std::min(E, boundary);
  model::SequenceInput in{&st, std::span<const int32_t>(prompt.data(), size_t(prefill)), false,
                          bounded ? std::max<int64_t>(0, E - R) : -1};
  g.forward->run({&in, 1});
  for (int64_t p = E; p < boundary; ++p) {
    model::SequenceInput step{&st, std::span<const int32_t>(&output[size_t(p - E)], 1), false};
    g.forward->run({&step, 1});
  }
  EXPECT_EQ(st.length(), boundary);
  return st;
}

void expect_same(const Out& got, const Out& want, const char* what) {
  ASSERT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    const auto& a = got.logprobs[i].top;
    const auto& b = want.logprobs[i].top;
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].token, b[k].token) << what << ": token " << i << " rank " << k;
      ASSERT_EQ(a[k].logprob, b[k].logprob) << what << ": token " << i << " rank " << k;
    }
  }
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Bounded replay: the earlier request (40-token prompt, 12 outputs, 51 tokens computed)
// last crossed a block boundary in decode, at 48; the next turn hits exactly there.
TEST(PrefixSnapshot, HitAtBoundaryReplaysNothingAndEqualsInPlaceContinuation) {
  const auto& g = golden_model();
  Engine e(*g.forward, nullptr, snapshot_engine(/*bounded=*/true, /*snapshots=*/true));
  const auto a = random_tokens(40, 41);
  const Out first = run_one(e, 1, a, 12);
  EXPECT_EQ(e.kv_cache().stats().snapshots_kept, 1);
  const auto b = concat(concat(a, first.tokens), random_tokens(7, 42));  // 59 tokens
  const int64_t computed_before = e.figures().scheduled_tokens;
  const Out second = run_one(e, 2, b, 3);

  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(s.prefix_hits, 1);
  EXPECT_EQ(s.snapshot_hits, 1);
  EXPECT_EQ(s.replay_hits, 0);
  EXPECT_EQ(s.hit_tokens, 48);
  EXPECT_EQ(s.replay_tokens, 0);
  EXPECT_EQ(e.figures().scheduled_tokens - computed_before, (59 - 48) + 2);  // + 2 decodes

  model::SequenceState st = earlier_state(a, first.tokens, 48, true);
  const Out in_place = continue_greedy(st, std::span<const int32_t>(b).subspan(48),
                                       std::max<int64_t>(48, 59 - g.config.replay_tokens), 3);
  expect_same(second, in_place, "snapshot hit vs in-place continuation");
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
}

// Full compute, and a boundary inside the prompt: the earlier request (40 tokens, 3
// outputs, 42 computed) ends its prefill's first chunk at 32 so its rings there can be
// copied. The hit at 32 then equals the in-place continuation and a cold run.
TEST(PrefixSnapshot, FullComputeHitEqualsInPlaceAndColdRun) {
  const auto& g = golden_model();
  Engine e(*g.forward, nullptr, snapshot_engine(/*bounded=*/false, /*snapshots=*/true));
  const auto a = random_tokens(40, 43);
  const Out first = run_one(e, 1, a, 3);
  const auto b = concat(concat(a, first.tokens), random_tokens(9, 44));  // 52 tokens
  const Out second = run_one(e, 2, b, 4);
  EXPECT_EQ(e.kv_cache().stats().snapshot_hits, 1);
  EXPECT_EQ(e.kv_cache().stats().hit_tokens, 32);
  EXPECT_EQ(e.kv_cache().stats().replay_tokens, 0);

  model::SequenceState st = earlier_state(a, first.tokens, 32, false);
  const Out in_place = continue_greedy(st, std::span<const int32_t>(b).subspan(32), -1, 4);
  expect_same(second, in_place, "snapshot hit vs in-place continuation");
  model::SequenceState fresh = model::SequenceState::empty(g.config);
  const Out cold = continue_greedy(fresh, b, -1, 4);
  expect_same(second, cold, "snapshot hit vs cold run");
}

// A hit on a boundary with no snapshot (the earlier request's is at 48, the hit at 32)
// replays exactly as before and gives the cold run's logits.
TEST(PrefixSnapshot, HitElsewhereFallsBackToExactReplay) {
  const auto& g = golden_model();
  Engine e(*g.forward, nullptr, snapshot_engine(/*bounded=*/true, /*snapshots=*/true));
  const auto a = random_tokens(40, 41);
  run_one(e, 1, a, 12);
  const auto c = concat(std::vector<int32_t>(a.begin(), a.begin() + 32), random_tokens(21, 45));
  const Out hit = run_one(e, 2, c, 3);
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(s.hit_tokens, 32);
  EXPECT_EQ(s.snapshot_hits, 0);
  EXPECT_EQ(s.replay_hits, 1);
  EXPECT_EQ(s.replay_tokens, 32);  // (Ne + 1)(W - 1) = 105 reaches back to 0

  Engine cold_engine(*g.forward, nullptr, snapshot_engine(true, false, /*prefix_cache=*/false));
  expect_same(hit, run_one(cold_engine, 2, c, 3), "replayed hit vs cold run");
}

// Which is closer to full compute where a snapshot and a cold run with the decoder tail
// differ (the snapshot holds decoder window rows the tail never computes)? Printed for
// docs/model-notes.md; the two must differ, or the comparison says nothing.
TEST(PrefixSnapshot, SnapshotVsColdRunAgainstFullCompute) {
  const auto& g = golden_model();
  const int64_t R = g.config.replay_tokens;
  double sum_snap = 0, sum_cold = 0;
  int n = 0, snap_closer = 0;
  for (const uint32_t seed : {51u, 52u, 53u, 54u, 55u, 56u}) {
    for (const int64_t extra : {3, 7, 24}) {
      const auto a = random_tokens(40, seed);
      model::SequenceState ref = model::SequenceState::empty(g.config);
      const Out first = continue_greedy(ref, a, std::max<int64_t>(0, 40 - R), 12);
      const auto b = concat(concat(a, first.tokens), random_tokens(extra, seed + 100));
      const int64_t E = static_cast<int64_t>(b.size());
      model::SequenceState st = earlier_state(a, first.tokens, 48, true);
      model::SequenceInput in{&st, std::span<const int32_t>(b).subspan(48), false,
                              std::max<int64_t>(48, E - R)};
      const auto snap = g.forward->run({&in, 1})[0];
      model::SequenceState c1 = model::SequenceState::empty(g.config);
      model::SequenceInput cold_in{&c1, b, false, std::max<int64_t>(0, E - R)};
      const auto cold = g.forward->run({&cold_in, 1})[0];
      model::SequenceState c2 = model::SequenceState::empty(g.config);
      model::SequenceInput full_in{&c2, b, false, -1};
      const auto full = g.forward->run({&full_in, 1})[0];
      const std::vector<double> want(full.begin(), full.end());
      const double ds = testing::relative_l2(snap.data(), want);
      const double dc = testing::relative_l2(cold.data(), want);
      EXPECT_NE(snap, cold) << "seed " << seed << " extra " << extra;
      std::printf("[ snapshot ] seed %u, %ld new tokens: rel L2 to full compute: snapshot %.4f, cold %.4f\n",
                  seed, long(extra), ds, dc);
      sum_snap += ds, sum_cold += dc, snap_closer += ds < dc, ++n;
    }
  }
  std::printf("[ snapshot ] mean rel L2 to full compute over %d cases: snapshot %.4f, cold %.4f; "
              "snapshot closer in %d\n",
              n, sum_snap / n, sum_cold / n, snap_closer);
}

// --- bookkeeping (KvCacheManager, no model) ---

KvCacheConfig snapshot_config(int64_t snapshot_slots) {
  KvCacheConfig c;
  c.block_size = 4, c.num_blocks = 8, c.swa_slots = 2, c.window = 6;
  c.snapshot_slots = snapshot_slots;
  return c;
}

std::vector<int32_t> iota(int32_t first, int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = first + int32_t(i);
  return t;
}

// Request 1 computes 10 tokens and snapshots at 8: its snapshot is cached on the block
// [4, 8) when it ends, found by a hit at exactly 8, and dropped when that block is evicted.
TEST(PrefixSnapshot, EvictedWithItsBlock) {
  KvCacheManager kv(snapshot_config(2));
  const auto t = iota(100, 10);
  ASSERT_TRUE(kv.admit(1, kv.find_cached_prefix(t), 10));
  const int32_t slot = kv.snapshot_slot_for(1);
  EXPECT_EQ(slot, 2);  // after the 2 ring slots
  kv.commit_full_blocks(1, t, 10);
  kv.note_snapshot(1, 8);
  const int32_t snap_block = kv.block_table(1)[1];
  kv.free(1);
  kv.check_invariants();
  EXPECT_EQ(kv.snapshots()->num_cached(), 1);
  EXPECT_EQ(kv.snapshots()->cached_blocks(), std::vector<int32_t>{snap_block});
  EXPECT_EQ(kv.stats().snapshots_kept, 1);

  CachedPrefix hit = kv.find_cached_prefix(t);  // 10 tokens: a hit of 8
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.snapshot_slot, slot);
  EXPECT_EQ(hit.replay_from, 8);  // nothing to replay (the window would replay 6)
  // A hit of 4 (the tokens end inside block [4, 8)) has no snapshot: it replays.
  CachedPrefix short_hit = kv.find_cached_prefix(iota(100, 7));
  EXPECT_EQ(short_hit.num_tokens, 4);
  EXPECT_EQ(short_hit.snapshot_slot, -1);
  EXPECT_EQ(short_hit.replay_from, 0);

  // The LRU list now holds 5 never-used blocks, then request 1's private last block, its
  // [4, 8) block, its [0, 4) block. 7 new blocks evict [4, 8), and its snapshot with it.
  ASSERT_TRUE(kv.admit(2, kv.find_cached_prefix(iota(900, 28)), 28));
  kv.check_invariants();
  EXPECT_EQ(kv.stats().evictions, 1);
  EXPECT_EQ(kv.snapshots()->num_cached(), 0);
  EXPECT_EQ(kv.stats().snapshots_evicted, 1);
  kv.free(2, /*keep_snapshot=*/true);  // it wrote none: nothing cached
  EXPECT_EQ(kv.snapshots()->num_cached(), 0);
  EXPECT_EQ(kv.snapshots()->num_free(), 2);
  hit = kv.find_cached_prefix(t);
  EXPECT_EQ(hit.num_tokens, 4);  // [0, 4) survived, without a snapshot
  EXPECT_EQ(hit.snapshot_slot, -1);
}

// With every slot taken, a writer takes the least recently used cached snapshot's slot;
// a request whose snapshot may still be overwritten (keep_snapshot false) caches none.
TEST(PrefixSnapshot, WritersReuseTheLeastRecentlyUsedSlot) {
  KvCacheManager kv(snapshot_config(1));
  const auto t = iota(100, 9);
  ASSERT_TRUE(kv.admit(1, kv.find_cached_prefix(t), 9));
  EXPECT_EQ(kv.snapshot_slot_for(1), 2);
  kv.commit_full_blocks(1, t, 8);
  kv.note_snapshot(1, 8);
  kv.free(1);
  EXPECT_EQ(kv.find_cached_prefix(t).snapshot_slot, 2);

  ASSERT_TRUE(kv.admit(2, kv.find_cached_prefix(iota(500, 9)), 9));
  EXPECT_EQ(kv.snapshot_slot_for(2), 2);  // request 1's, evicted
  EXPECT_EQ(kv.stats().snapshots_evicted, 1);
  EXPECT_EQ(kv.find_cached_prefix(t).snapshot_slot, -1);
  ASSERT_TRUE(kv.admit(3, kv.find_cached_prefix(iota(700, 9)), 9));
  EXPECT_EQ(kv.snapshot_slot_for(3), -1);  // the only slot is being written
  kv.commit_full_blocks(2, iota(500, 9), 8);
  kv.note_snapshot(2, 8);
  kv.free(2, /*keep_snapshot=*/false);
  EXPECT_EQ(kv.snapshots()->num_cached(), 0);
  EXPECT_EQ(kv.stats().snapshots_kept, 1);
  kv.free(3);
  kv.check_invariants();
}

// Snapshots are reserved from the budget like the rings: each costs the SWA rings and
// compressor carry of one request (model/footprint.h), and the engine sizes them from
// max_num_running unless told otherwise or turned off.
TEST(PrefixSnapshot, BudgetAccounting) {
  const model::ModelConfig& m = golden_model().config;
  const model::RequestState state = model::request_state_bytes(m);
  const int64_t budget = 8 << 20;
  const KvCacheBudget none = plan_kv_budget(m, budget, 4, 16, 0);
  const KvCacheBudget some = plan_kv_budget(m, budget, 4, 16, 8);
  EXPECT_EQ(some.snapshot_bytes, state.swa_bytes + state.compressor_bytes);
  EXPECT_EQ(some.snapshot_bytes, m.num_hidden_layers * m.sliding_window *
                                      (m.head_dim + m.head_dim / 32) +
                                      state.compressor_bytes);
  EXPECT_EQ(some.reserved_bytes, none.reserved_bytes + 8 * some.snapshot_bytes);
  EXPECT_EQ(some.num_blocks, (budget - some.reserved_bytes) / some.bytes_per_block);
  EXPECT_LT(some.num_blocks, none.num_blocks);

  EngineConfig on = snapshot_engine(true, true);
  const KvCacheConfig kv_on = prepare_engine(m, on);
  EXPECT_EQ(kv_on.snapshot_slots, 2 * on.scheduler.max_num_running);
  EXPECT_EQ(kv_on.storage_slots(), 3 * on.scheduler.max_num_running);
  EXPECT_EQ(on.scheduler.snapshot_block_size, 16);
  EXPECT_EQ(kv_on.num_blocks,
            plan_kv_budget(m, on.kv_budget_bytes, 4, 16, 8).num_blocks);
  EngineConfig off = snapshot_engine(true, false);
  const KvCacheConfig kv_off = prepare_engine(m, off);
  EXPECT_EQ(kv_off.snapshot_slots, 0);
  EXPECT_EQ(off.scheduler.snapshot_block_size, 0);
  EXPECT_EQ(kv_off.num_blocks, plan_kv_budget(m, off.kv_budget_bytes, 4, 16, 0).num_blocks);
  EngineConfig no_cache = snapshot_engine(true, true, /*prefix_cache=*/false);
  EXPECT_EQ(prepare_engine(m, no_cache).snapshot_slots, 0);  // nothing to attach them to
}

// A preempted request keeps its snapshot too: its recompute hits its own last boundary
// and replays nothing, and its tokens are those of a run that never preempted. 7 blocks
// of 16: request 1 (20 + 44 tokens, 4 blocks at most) and request 2 (26 + 40) decode in
// step; when request 1 reaches 48 tokens request 2 (the newest) is at 54 and is
// preempted with its snapshot at 48. Request 1 takes request 2's partial last block (the
// LRU head), so blocks [0, 48) and the snapshot survive until request 2 comes back.
TEST(PrefixSnapshot, PreemptedRequestResumesFromItsSnapshot) {
  const auto& g = golden_model();
  EngineConfig tight = snapshot_engine(true, true);
  tight.scheduler.max_num_running = 2;
  const KvCacheBudget base = plan_kv_budget(g.config, 1 << 30, 2, 16, 4);
  tight.kv_budget_bytes = base.reserved_bytes + 7 * base.bytes_per_block;
  Engine e(*g.forward, nullptr, tight);
  EngineConfig roomy_config = snapshot_engine(true, false, false);
  roomy_config.scheduler.max_num_running = 2;
  Engine roomy(*g.forward, nullptr, roomy_config);
  const std::vector<int32_t> p1 = random_tokens(20, 61), p2 = random_tokens(26, 62);
  e.add_request(1, p1, greedy(44));
  e.add_request(2, p2, greedy(40));
  roomy.add_request(1, p1, greedy(44));
  roomy.add_request(2, p2, greedy(40));
  std::map<RequestId, std::vector<int32_t>> got, want;
  for (int n = 0; e.has_unfinished() && n < 5000; ++n) {
    for (const RequestOutput& o : e.step())
      got[o.id].insert(got[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
    e.kv_cache().check_invariants();
  }
  while (roomy.has_unfinished())
    for (const RequestOutput& o : roomy.step())
      want[o.id].insert(want[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(e.figures().preemptions, 1);
  EXPECT_EQ(s.snapshot_hits, 1);
  EXPECT_EQ(s.hit_tokens, 48);
  EXPECT_EQ(s.replay_tokens, 0);
  // Resuming from its own snapshot is the request going on in place.
  EXPECT_EQ(got, want);
  EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
}

// Conversations under a tight KV budget (evictions, preemptions, snapshot slots reused,
// async plans in flight), under full compute where a snapshot hit must equal a replayed or
// cold one: every turn's tokens equal those of the same run with snapshots off, and the
// manager's invariants hold after every step.
TEST(PrefixSnapshot, TightConversationsUnderFullComputeMatchSnapshotsOff) {
  const auto& g = golden_model();
  auto run = [&](bool snapshots, KvCacheStats* stats) {
    EngineConfig c = snapshot_engine(/*bounded=*/false, snapshots);
    c.scheduler.max_num_running = 3;
    const KvCacheBudget base = plan_kv_budget(g.config, 1 << 30, 3, 16, snapshots ? 6 : 0);
    c.kv_budget_bytes = base.reserved_bytes + 14 * base.bytes_per_block;
    Engine e(*g.forward, nullptr, c);
    const auto system = random_tokens(20, 70);
    std::vector<std::vector<int32_t>> prompts(5);
    std::vector<std::vector<int32_t>> outputs;
    for (int turn = 0; turn < 3; ++turn) {
      std::map<RequestId, std::vector<int32_t>> got;
      for (RequestId conv = 0; conv < 5; ++conv) {
        prompts[conv] = concat(turn == 0 ? system : prompts[conv],
                               random_tokens(7 + conv, uint32_t(71 + 10 * turn + conv)));
        e.add_request(conv, prompts[conv], greedy(9));
      }
      for (int n = 0; e.has_unfinished() && n < 5000; ++n) {
        for (const RequestOutput& o : e.step())
          got[o.id].insert(got[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
        e.kv_cache().check_invariants();
      }
      for (RequestId conv = 0; conv < 5; ++conv) {
        prompts[conv] = concat(prompts[conv], got[conv]);
        outputs.push_back(got[conv]);
      }
    }
    EXPECT_EQ(e.kv_cache().num_used_blocks(), 0);
    *stats = e.kv_cache().stats();
    return outputs;
  };
  KvCacheStats on{}, off{};
  const auto with = run(true, &on);
  const auto without = run(false, &off);
  EXPECT_EQ(with, without);
  std::printf("[ snapshot ] tight conversations: snapshot hits %ld, replay hits %ld (off: %ld), "
              "evictions %ld, snapshots evicted %ld\n",
              long(on.snapshot_hits), long(on.replay_hits), long(off.replay_hits),
              long(on.evictions), long(on.snapshots_evicted));
  EXPECT_GT(on.snapshot_hits, 0);
  EXPECT_GT(on.evictions, 0);
  EXPECT_LT(on.replay_tokens, off.replay_tokens);
}

// Window snapshots move with their block through the host and disk tiers (docs/kv-cache.md
// "Window snapshots in the tiers"). The earlier request (40-token prompt, 12 outputs,
// snapshot at 48) ends; three 101-token fillers push all its blocks out of a 12-block
// pool: to a 64-block host tier, or through a 6-block one on to disk. The next turn hits
// at 48 with every block and the snapshot coming back from that tier: it replays nothing
// and equals the in-place continuation bit for bit. On disk the snapshot is in the
// block's file, so a fresh engine on the same dir (a restart) does the same.
struct TierCase {
  KvTier tier;
  bool restart;
};

EngineConfig tier_snapshot_engine(KvTier tier, const std::string& dir) {
  const auto& g = golden_model();
  EngineConfig c = snapshot_engine(/*bounded=*/true, /*snapshots=*/true);
  const int64_t running = c.scheduler.max_num_running;
  const KvCacheBudget base = plan_kv_budget(g.config, 1 << 30, running, 16, 2 * running);
  c.kv_budget_bytes = base.reserved_bytes + 12 * base.bytes_per_block;
  const int64_t block = PagedKvStorage::block_bytes_of(g.config, 16);
  const int64_t snap = PagedKvStorage::snapshot_bytes_of(g.config);
  const int64_t host_blocks = tier == KvTier::Host ? 64 : 6, host_snaps = tier == KvTier::Host ? 8 : 6;
  c.kv_offload_snapshots = host_snaps;
  c.kv_offload_bytes = host_blocks * block + host_snaps * snap;
  if (tier == KvTier::Disk) {
    c.kv_disk_dir = dir;
    c.kv_disk_snapshots = 16;
    c.kv_disk_bytes = 64 * BlockFileGeometry{0, 16, block}.file_bytes() + 16 * snap;
  }
  return c;
}

void boundary_block_comes_back_with_its_snapshot(TierCase tc) {
  const auto& g = golden_model();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("troupe-tier-snapshot-" + std::to_string(::getpid()) + "-" +
                        std::to_string(int(tc.tier)) + std::to_string(tc.restart));
  fs::remove_all(dir);
  auto e = std::make_unique<Engine>(*g.forward, nullptr, tier_snapshot_engine(tc.tier, dir));
  const KvCacheConfig& kvc = e->kv_cache().config();
  ASSERT_EQ(kvc.num_blocks, 12);
  ASSERT_EQ(kvc.host_blocks, tc.tier == KvTier::Host ? 64 : 6);
  ASSERT_GE(kvc.host_snapshots, 6);
  ASSERT_EQ(kvc.disk_snapshots, tc.tier == KvTier::Disk ? 16 : 0);
  const auto a = random_tokens(40, 41);
  const Out first = run_one(*e, 1, a, 12);
  for (int f = 0; f < 3; ++f) run_one(*e, 10 + f, random_tokens(101, uint32_t(50 + f)), 1);
  EXPECT_GE(e->kv_cache().tiers()->stats().snapshot_saves, 1);
  if (tc.tier == KvTier::Disk) {
    EXPECT_GE(e->kv_cache().tiers()->stats().snapshot_spills, 1);
  }
  if (tc.restart) e = std::make_unique<Engine>(*g.forward, nullptr, tier_snapshot_engine(tc.tier, dir));
  const KvCacheStats before = e->kv_cache().stats();
  const auto b = concat(concat(a, first.tokens), random_tokens(7, 42));  // 59 tokens
  const Out second = run_one(*e, 2, b, 3);

  const KvCacheStats& s = e->kv_cache().stats();
  EXPECT_EQ(s.snapshot_hits - before.snapshot_hits, 1);
  EXPECT_EQ(s.tier_snapshot_hits[int(tc.tier)] - before.tier_snapshot_hits[int(tc.tier)], 1);
  EXPECT_EQ(s.hit_tokens - before.hit_tokens, 48);
  EXPECT_EQ(s.tier_hit_tokens[int(tc.tier)] - before.tier_hit_tokens[int(tc.tier)], 48);
  EXPECT_EQ(s.replay_tokens - before.replay_tokens, 0);
  EXPECT_EQ(e->kv_cache().tiers()->stats().snapshot_loads[int(tc.tier)], 1);

  model::SequenceState st = earlier_state(a, first.tokens, 48, true);
  const Out in_place = continue_greedy(st, std::span<const int32_t>(b).subspan(48),
                                       std::max<int64_t>(48, 59 - g.config.replay_tokens), 3);
  expect_same(second, in_place, "snapshot from a lower tier vs in-place continuation");
  e.reset();
  fs::remove_all(dir);
}

TEST(PrefixSnapshot, BoundaryBlockPushedToHostComesBackWithItsSnapshot) {
  boundary_block_comes_back_with_its_snapshot({KvTier::Host, false});
}

TEST(PrefixSnapshot, BoundaryBlockPushedToDiskComesBackWithItsSnapshot) {
  boundary_block_comes_back_with_its_snapshot({KvTier::Disk, false});
}

TEST(PrefixSnapshot, BoundaryBlockOnDiskComesBackWithItsSnapshotAfterARestart) {
  boundary_block_comes_back_with_its_snapshot({KvTier::Disk, true});
}

// The control: without tier snapshots (0 slots) the same hit comes from the host tier but
// replays (exact replay: the bounded replay depth before min(48, 59 - R)).
TEST(PrefixSnapshot, WithoutTierSnapshotsTheHostHitReplays) {
  const auto& g = golden_model();
  EngineConfig c = tier_snapshot_engine(KvTier::Host, "");
  c.kv_offload_snapshots = 0;
  Engine e(*g.forward, nullptr, c);
  const auto a = random_tokens(40, 41);
  const Out first = run_one(e, 1, a, 12);
  for (int f = 0; f < 3; ++f) run_one(e, 10 + f, random_tokens(101, uint32_t(50 + f)), 1);
  const KvCacheStats before = e.kv_cache().stats();
  run_one(e, 2, concat(concat(a, first.tokens), random_tokens(7, 42)), 3);
  const KvCacheStats& s = e.kv_cache().stats();
  EXPECT_EQ(s.tier_hit_tokens[int(KvTier::Host)] - before.tier_hit_tokens[int(KvTier::Host)], 48);
  EXPECT_EQ(s.snapshot_hits - before.snapshot_hits, 0);
  EXPECT_GT(s.replay_tokens - before.replay_tokens, 0);
}

}  // namespace
}  // namespace troupe::runtime
