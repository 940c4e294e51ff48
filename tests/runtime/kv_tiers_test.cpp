// Host and disk tier bookkeeping (issue 14, docs/kv-cache.md "Host and disk tiers"): the
// tier index's LRU and pins, and the TierOps KvCacheManager emits as the primary pool
// evicts and as hits come back from lower tiers, step by step against expected tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/tier_index.h"
#include "runtime/kv_cache_test_util.h"

namespace troupe::runtime {
namespace {

using test::concat;
using test::iota_tokens;

TEST(TierIndex, ReusesTheLeastRecentlyUsedUnpinnedSlot) {
  TierIndex t(2, 4);
  const auto a = iota_tokens(0, 4), b = iota_tokens(10, 4), c = iota_tokens(20, 4);
  std::optional<TierIndex::Displaced> d;
  EXPECT_EQ(t.insert(1, 0, a, &d), 0);
  EXPECT_EQ(t.insert(2, 0, b, &d), 1);
  EXPECT_FALSE(d);
  t.touch(0);  // slot 1 (hash 2) is now the oldest
  t.pin(1);
  EXPECT_EQ(t.insert(3, 0, c, &d), 0);  // slot 1 is pinned: slot 0 goes
  ASSERT_TRUE(d);
  EXPECT_EQ(d->hash, 1u);
  EXPECT_EQ(d->tokens, a);
  EXPECT_EQ(t.find(3, 0, c), 0);
  EXPECT_EQ(t.find(1, 0, a), -1);
  EXPECT_EQ(t.find(2, 0, c), -1);  // same hash, other tokens: a miss
  EXPECT_EQ(t.find(2, 7, b), -1);  // other parent: a miss
  t.pin(0);
  EXPECT_EQ(t.insert(4, 0, a, &d), -1);  // everything pinned: refused
  t.unpin(0), t.unpin(1);
  t.erase(1);
  EXPECT_EQ(t.num_used(), 1);
  t.check_invariants();
}

KvCacheConfig tier_config(int64_t num_blocks, int64_t host, int64_t disk) {
  KvCacheConfig c;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.swa_slots = 4;
  c.host_blocks = host;
  c.disk_blocks = disk;
  return c;
}

// Runs a request over `tokens` to the end and frees it (its full blocks stay cached).
void run_and_free(KvCacheManager& kv, RequestId id, const std::vector<int32_t>& tokens) {
  auto adm = kv.admit(id, kv.find_cached_prefix(tokens), int64_t(tokens.size()));
  ASSERT_TRUE(adm);
  kv.commit_full_blocks(id, tokens, int64_t(tokens.size()));
  kv.free(id);
  kv.check_invariants();
}

std::vector<TierOpKind> kinds(const std::vector<TierOp>& ops) {
  std::vector<TierOpKind> k;
  for (const TierOp& op : ops) k.push_back(op.kind);
  return k;
}

TEST(KvTiers, EvictedBlocksGoToHostAndComeBackByCopy) {
  KvCacheManager kv(tier_config(8, 16, 0));
  const auto a = iota_tokens(100, 16);  // 4 blocks
  run_and_free(kv, 1, a);
  EXPECT_TRUE(kv.take_tier_ops().empty());
  run_and_free(kv, 2, iota_tokens(500, 32));  // 8 blocks: 4 never used, then a's 4
  const std::vector<TierOp> saves = kv.take_tier_ops();
  ASSERT_EQ(saves.size(), 4u);
  std::map<uint64_t, int32_t> slot_of;  // hash -> host slot it was saved to
  for (const TierOp& op : saves) {
    EXPECT_EQ(op.kind, TierOpKind::SaveToHost);
    slot_of[op.hash] = op.host_slot;
  }
  EXPECT_EQ(kv.tiers()->host().num_used(), 4);

  // a + 3 tokens: 4 full blocks, the hit is capped at 4 (one token left to compute).
  const auto b = concat(a, {1, 2, 3});
  CachedPrefix hit = kv.find_cached_prefix(b);
  EXPECT_EQ(hit.num_tokens, 16);
  ASSERT_EQ(hit.fetches.size(), 4u);
  for (const TierFetch& f : hit.fetches) EXPECT_EQ(f.src.tier, KvTier::Host);
  auto adm = kv.admit(3, std::move(hit), int64_t(b.size()));
  ASSERT_TRUE(adm);
  EXPECT_EQ(adm->num_cached_tokens, 16);
  const std::vector<TierOp> ops = kv.take_tier_ops();
  // 5 blocks taken from request 2's cached ones: those 5 are saved first, then a's 4
  // are loaded into the first 4 of them.
  ASSERT_EQ(ops.size(), 9u);
  std::set<int32_t> saved;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ops[i].kind, TierOpKind::SaveToHost);
    saved.insert(ops[i].block);
  }
  const auto table = kv.block_table(3);
  for (size_t i = 5; i < 9; ++i) {
    EXPECT_EQ(ops[i].kind, TierOpKind::LoadFromHost);
    EXPECT_EQ(ops[i].block, table[i - 5]);
    EXPECT_EQ(saved.count(ops[i].block), 1u);  // a block whose old rows were saved first
    ASSERT_EQ(slot_of.count(ops[i].hash), 1u);
    EXPECT_EQ(ops[i].host_slot, slot_of[ops[i].hash]);
  }
  EXPECT_EQ(kv.stats().tier_hit_tokens[int(KvTier::Host)], 16);
  EXPECT_EQ(kv.stats().tier_hits[int(KvTier::Host)], 1);
  EXPECT_EQ(kv.stats().hit_tokens, 16);
  kv.check_invariants();
  kv.free(3);
  // The loaded blocks are in the primary prefix cache again: a hit there, no fetch.
  CachedPrefix again = kv.find_cached_prefix(b);
  EXPECT_EQ(again.num_tokens, 16);
  EXPECT_TRUE(again.fetches.empty());
}

// Window snapshots move with their block: the primary pool evicts a block with a cached
// snapshot and the save carries the snapshot too; a hit at that boundary finds it on the
// host tier and admit restores it straight into the request's ring slot (restore_slot ==
// swa_slot), by an op ahead of the saves its own take causes (they may reuse the slot).
TEST(KvTiers, SnapshotsMoveWithTheirBlock) {
  KvCacheConfig c = tier_config(4, 2, 0);
  c.snapshot_slots = 2;
  c.host_snapshots = 1;
  KvCacheManager kv(c);
  const auto a = iota_tokens(100, 9);  // 2 full blocks + 1 token; snapshot at 8
  ASSERT_TRUE(kv.admit(1, kv.find_cached_prefix(a), 9));
  const int32_t snap = kv.snapshot_slot_for(1);
  EXPECT_EQ(snap, 4);  // after the 4 ring slots
  kv.commit_full_blocks(1, a, 9);
  kv.note_snapshot(1, 8);
  kv.free(1);
  ASSERT_EQ(kv.snapshots()->num_cached(), 1);
  // 4 blocks: the never-used one, a's partial one, then [4, 8) with its snapshot, [0, 4).
  run_and_free(kv, 2, iota_tokens(500, 16));
  const std::vector<TierOp> saves = kv.take_tier_ops();
  ASSERT_EQ(kinds(saves), (std::vector<TierOpKind>{TierOpKind::SaveToHost, TierOpKind::SaveToHost}));
  EXPECT_EQ(saves[0].snapshot_slot, snap);
  EXPECT_EQ(saves[0].host_snapshot, 0);
  EXPECT_EQ(saves[1].snapshot_slot, -1);
  EXPECT_EQ(kv.snapshots()->num_cached(), 0);  // it left the primary tier with its block
  EXPECT_EQ(kv.tiers()->host_snapshots().num_used(), 1);
  EXPECT_EQ(kv.tiers()->stats().snapshot_saves, 1);

  CachedPrefix hit = kv.find_cached_prefix(a);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.snapshot_slot, -1);
  ASSERT_TRUE(hit.tier_snapshot);
  EXPECT_EQ(hit.tier_snapshot->tier, KvTier::Host);
  EXPECT_EQ(hit.replay_from, 8);  // nothing to replay
  // A hit ending elsewhere ([0, 4)) has no snapshot.
  EXPECT_FALSE(kv.find_cached_prefix(iota_tokens(100, 5)).tier_snapshot);
  const auto adm = kv.admit(3, std::move(hit), 9);
  ASSERT_TRUE(adm);
  EXPECT_EQ(adm->restore_slot, adm->swa_slot);
  EXPECT_EQ(adm->replay_from, 8);
  const std::vector<TierOp> ops = kv.take_tier_ops();
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops[0].kind, TierOpKind::LoadSnapshot);
  EXPECT_EQ(ops[0].ring_slot, adm->swa_slot);
  EXPECT_EQ(ops[0].host_snapshot, 0);
  for (size_t i = 1; i < ops.size(); ++i) EXPECT_NE(ops[i].kind, TierOpKind::LoadSnapshot);
  EXPECT_EQ(kv.stats().snapshot_hits, 1);
  EXPECT_EQ(kv.stats().tier_snapshot_hits[int(KvTier::Host)], 1);
  EXPECT_EQ(kv.stats().replay_tokens, 0);
  kv.check_invariants();
  kv.free(3);
  kv.check_invariants();
}

TEST(KvTiers, HostSlotsReusedSpillToDiskAndDiskDropsOverItsCap) {
  KvCacheManager kv(tier_config(2, 2, 2));
  // Each 8-token sequence fills the 2-block pool; the next one evicts it.
  for (int i = 0; i < 4; ++i) run_and_free(kv, i, iota_tokens(1000 * (i + 1), 8));
  // Evictions: seq0 -> host (2 saves); seq1 -> host reuses seq0's slots: spill + save
  // twice; seq2 -> spill seq1 (disk full of seq0: drop first) ...
  const std::vector<TierOp> ops = kv.take_tier_ops();
  using K = TierOpKind;
  // Until the plan carrying them has run, a spilled block's file is not there: no hit.
  kv.set_disk_reader([](uint64_t, uint64_t, std::span<const int32_t>, std::vector<uint8_t>&, std::vector<uint8_t>&) {
    ADD_FAILURE() << "a file read before its spill ran";
    return false;
  });
  EXPECT_EQ(kv.find_cached_prefix(concat(iota_tokens(2000, 8), {1})).num_tokens, 0);
  EXPECT_EQ(kv.tiers()->stats().unwritten_misses, 1);
  kv.tier_ops_done(ops);
  const std::vector<K> want = {K::SaveToHost, K::SaveToHost,                  // seq0 evicted
                               K::SpillToDisk, K::SaveToHost, K::SpillToDisk, K::SaveToHost,
                               K::DropFromDisk, K::SpillToDisk, K::SaveToHost,  // seq2 evicted
                               K::DropFromDisk, K::SpillToDisk, K::SaveToHost};
  EXPECT_EQ(kinds(ops), want);
  EXPECT_EQ(kv.tiers()->stats().spills, 4);
  EXPECT_EQ(kv.tiers()->stats().disk_drops, 2);
  // The spill of a slot comes right before the save that reuses it.
  EXPECT_EQ(ops[2].host_slot, ops[3].host_slot);
  // Now: primary seq3, host seq2, disk seq1, seq0 gone.
  int reads = 0;  // the disk reader is called for disk hits only
  kv.set_disk_reader([&](uint64_t, uint64_t, std::span<const int32_t>, std::vector<uint8_t>& p, std::vector<uint8_t>&) {
    ++reads;
    p.assign(3, 7);
    return true;
  });
  EXPECT_EQ(kv.find_cached_prefix(concat(iota_tokens(1000, 8), {1})).num_tokens, 0);
  CachedPrefix h1 = kv.find_cached_prefix(concat(iota_tokens(2000, 8), {1}));
  ASSERT_EQ(h1.fetches.size(), 2u);
  EXPECT_EQ(h1.fetches[0].src.tier, KvTier::Disk);
  EXPECT_EQ(reads, 2);
  CachedPrefix h2 = kv.find_cached_prefix(concat(iota_tokens(3000, 8), {1}));
  ASSERT_EQ(h2.fetches.size(), 2u);
  EXPECT_EQ(h2.fetches[0].src.tier, KvTier::Host);
  auto adm = kv.admit(9, std::move(h1), 8);  // the pool holds 2 blocks
  ASSERT_TRUE(adm);
  const std::vector<TierOp> load = kv.take_tier_ops();
  ASSERT_FALSE(load.empty());
  EXPECT_EQ(load.back().kind, TierOpKind::LoadFromDisk);
  EXPECT_EQ(load.back().payload, std::vector<uint8_t>(3, 7));
  EXPECT_EQ(kv.stats().tier_hits[int(KvTier::Disk)], 1);
  kv.check_invariants();
}

TEST(KvTiers, ADiskFileFailingItsCheckIsAMissAndForgotten) {
  KvCacheManager kv(tier_config(2, 1, 4));
  for (int i = 0; i < 3; ++i) run_and_free(kv, i, iota_tokens(1000 * (i + 1), 8));
  kv.tier_ops_done(kv.take_tier_ops());
  kv.set_disk_reader([](uint64_t, uint64_t, std::span<const int32_t>, std::vector<uint8_t>&, std::vector<uint8_t>&) {
    return false;  // every file corrupt
  });
  const auto tokens = concat(iota_tokens(1000, 8), {1});
  const int64_t on_disk = kv.tiers()->disk().num_used();
  ASSERT_GT(on_disk, 0);
  EXPECT_EQ(kv.find_cached_prefix(tokens).num_tokens, 0);
  EXPECT_EQ(kv.tiers()->disk().num_used(), on_disk - 1);
  EXPECT_EQ(kv.tiers()->stats().bad_files, 1);
  kv.check_invariants();
}

// Random admissions, growth and frees over a small pool with both tiers: no tier op ever
// reads (saves) a block some request held before the call that evicted it, every load
// fills a block of the admitted request's table, and the invariants hold after each call.
TEST(KvTiers, EvictionNeverTakesABlockARequestHolds) {
  KvCacheManager kv(tier_config(24, 16, 32));
  kv.set_disk_reader([](uint64_t, uint64_t, std::span<const int32_t>, std::vector<uint8_t>& p, std::vector<uint8_t>&) {
    p.assign(1, 0);
    return true;
  });
  std::mt19937 rng(5);
  std::map<RequestId, std::vector<int32_t>> running;
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 12; ++i) prefixes.push_back(iota_tokens(100 * i, 12 + 4 * (i % 3)));
  auto held = [&] {
    std::set<int32_t> s;
    for (const auto& [id, t] : running)
      for (int32_t b : kv.block_table(id)) s.insert(b);
    return s;
  };
  auto check_ops = [&](const std::set<int32_t>& before, RequestId id) {
    const std::vector<TierOp> ops = kv.take_tier_ops();
    kv.tier_ops_done(ops);  // as if the plan ran
    for (const TierOp& op : ops) {
      if (op.kind == TierOpKind::SaveToHost) {
        EXPECT_EQ(before.count(op.block), 0u) << op.block;
      }
      if (op.kind == TierOpKind::LoadFromHost || op.kind == TierOpKind::LoadFromDisk) {
        const auto t = kv.block_table(id);
        EXPECT_NE(std::find(t.begin(), t.end(), op.block), t.end());
      }
    }
  };
  int64_t lower_hits = 0;
  for (RequestId id = 0; id < 400; ++id) {
    if (running.size() >= 3 || (!running.empty() && rng() % 3 == 0)) {
      auto it = std::next(running.begin(), long(rng() % running.size()));
      kv.commit_full_blocks(it->first, it->second, int64_t(it->second.size()));
      kv.free(it->first);
      running.erase(it);
    }
    auto tokens = concat(prefixes[rng() % prefixes.size()], iota_tokens(int32_t(9000 + id), 3));
    const std::set<int32_t> before = held();
    CachedPrefix hit = kv.find_cached_prefix(tokens);
    lower_hits += !hit.fetches.empty();
    if (kv.admit(id, std::move(hit), int64_t(tokens.size()))) {
      check_ops(before, id);
      running[id] = tokens;
      const std::set<int32_t> before_grow = held();
      if (kv.allocate(id, int64_t(tokens.size()) + 8)) check_ops(before_grow, id);
    }
    kv.check_invariants();
  }
  EXPECT_GT(lower_hits, 10);
}

}  // namespace
}  // namespace troupe::runtime
