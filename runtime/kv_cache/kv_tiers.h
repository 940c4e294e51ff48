// The host and disk tiers below the primary pool (issue 14, docs/kv-cache.md "Host and
// disk tiers"): bookkeeping only. A cached block the primary pool evicts is saved to the
// host tier; a host slot that must be reused first spills its block to the disk tier
// (one file per block, size-capped, LRU). A prefix hit on a lower tier brings the block
// back into a fresh primary block by copy. The tiers are inclusive: a block brought back
// keeps its lower copies (evicted again, it is only touched), so a hot prefix costs one
// save. Every byte movement is a TierOp the executor carries out in plan order.
//
//   primary --evict--> host --reuse slot--> disk --over the cap--> deleted
//      ^                 |                    |
//      +---LoadFromHost--+----LoadFromDisk----+
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/kv_cache/tier_index.h"
#include "runtime/kv_cache/tier_op.h"
#include "runtime/kv_cache/tier_snapshots.h"

namespace troupe::runtime {

enum class KvTier : int8_t { Primary = 0, Host = 1, Disk = 2 };
inline constexpr int kNumKvTiers = 3;
const char* kv_tier_name(KvTier t);  // "primary", "host", "disk" (metric labels)

// A block a lower tier holds: which tier, which of its slots.
struct TierSource {
  KvTier tier = KvTier::Host;
  int32_t slot = -1;
};

struct KvTierStats {
  int64_t saves = 0;          // primary evictions copied to the host tier
  int64_t already_held = 0;   // primary evictions the host tier held already (touched)
  int64_t spills = 0;         // host blocks written to disk when their slot was reused
  int64_t disk_drops = 0;     // disk files deleted over the cap
  int64_t lost = 0;           // evictions no tier could take (every slot pinned)
  int64_t bad_files = 0;      // disk files that failed their check at a lookup (misses)
  int64_t unwritten_misses = 0;  // lookups of a disk block whose spill had not run yet
  int64_t loads[kNumKvTiers] = {0, 0, 0};  // blocks brought back, by source tier
  // Window snapshots moving with their blocks.
  int64_t snapshot_saves = 0;    // snapshots copied to the host tier with (or onto) their block
  int64_t snapshot_spills = 0;   // snapshots written into their block's disk file
  int64_t snapshot_displaced[kNumKvTiers] = {0, 0, 0};  // dropped for a newer one (block kept on
                                                        // host; the whole file on disk)
  int64_t snapshot_loads[kNumKvTiers] = {0, 0, 0};  // restored by a hit, by source tier
};

class KvTiers {
 public:
  // host_slots >= 1; disk_slots 0: no disk tier. host_snapshots / disk_snapshots: how
  // many of those blocks may carry a window snapshot (0: snapshots stay in primary).
  KvTiers(int64_t host_slots, int64_t disk_slots, int64_t block_size, int64_t host_snapshots = 0,
          int64_t disk_snapshots = 0);

  // A cached block left the primary pool (its bytes intact until this plan's forward);
  // snapshot_slot >= 0: the primary storage slot of its cached window snapshot, which
  // goes with it (the slot's bytes stay intact until this plan's forward too).
  void on_evicted(int32_t block, uint64_t hash, uint64_t parent_hash,
                  std::span<const int32_t> tokens, int32_t snapshot_slot = -1);
  // The lower tier holding this block (host first), verified against parent and tokens.
  std::optional<TierSource> find(uint64_t hash, uint64_t parent_hash,
                                 std::span<const int32_t> tokens);
  // Whether a lower tier holds this block, for rank choice (KvCacheManager::
  // cached_prefix_tokens): like find, but counts nothing and reads no file.
  bool holds(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const {
    return host_.find(hash, parent_hash, tokens) >= 0 ||
           (disk_.find(hash, parent_hash, tokens) >= 0 && !unwritten_.count(hash));
  }
  // An admission brings `src` back into primary block `block` (the ops bring the bytes;
  // from disk, `payload`: the block's bytes the hit's lookup read and checked).
  void load(const TierSource& src, int32_t block, std::vector<uint8_t> payload = {});
  // The lower tier holding this block with a window snapshot at its end (host first).
  std::optional<TierSource> find_snapshot(uint64_t hash, uint64_t parent_hash,
                                          std::span<const int32_t> tokens) const;
  // An admission restores that snapshot into its ring slot (from disk: `payload`, the
  // file's snapshot section the lookup read and checked).
  void load_snapshot(const TierSource& src, int32_t ring_slot, std::vector<uint8_t> payload = {});
  // The disk tier's file of `slot` failed its check at lookup: forget it (a miss). A
  // saved prefix's pinned file stays indexed (a miss each time) until it is unpinned.
  void drop_disk(int32_t slot);
  // KV save: a pinned primary block (its bytes never change) is written to its disk file,
  // with the window snapshot in primary storage slot `snapshot_slot` if >= 0 and a disk
  // snapshot slot can be had; the disk slot is pinned (never dropped) until unpin(). -1:
  // no disk tier, or every disk slot is pinned (the block stays in primary only).
  // Start-up: pins the disk slot holding this block (a saved prefix's), or -1.
  int32_t pin_disk(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens);
  // A saved prefix is deleted: its disk slot is unpinned if it still holds `hash`.
  void unpin_disk(int32_t slot, uint64_t hash);
  int32_t write_pinned(int32_t block, uint64_t hash, uint64_t parent_hash,
                       std::span<const int32_t> tokens, int32_t snapshot_slot);
  void pin(const TierSource& src) { index(src.tier).pin(src.slot); }
  void unpin(const TierSource& src) { index(src.tier).unpin(src.slot); }
  std::span<const int32_t> tokens_of(const TierSource& src) const {
    return index(src.tier).tokens_of(src.slot);
  }

  // Start-up: a block file found (and checked) in the disk dir. False: the disk tier is
  // full or holds that hash already (the file is left alone).
  // A file with a snapshot needs a free disk snapshot slot too.
  bool adopt_disk_block(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                        bool has_snapshot = false);

  // The executor ran these ops (the plan they travelled in is back): the files their
  // spills wrote exist now. Until then a disk block is no hit (its file is not written).
  void ops_done(std::span<const TierOp> ops);

  // The ops decided since the last call, in the order they must run.
  std::vector<TierOp> take_ops() { return std::exchange(ops_, {}); }
  bool has_pending_ops() const { return !ops_.empty(); }

  const TierIndex& host() const { return host_; }
  const TierIndex& disk() const { return disk_; }
  const TierSnapshots& host_snapshots() const { return host_snaps_; }
  const TierSnapshots& disk_snapshots() const { return disk_snaps_; }
  bool has_disk() const { return disk_.num_slots() > 0; }
  const KvTierStats& stats() const { return stats_; }
  void check_invariants() const;

 private:
  TierIndex& index(KvTier t) { return t == KvTier::Disk ? disk_ : host_; }
  const TierIndex& index(KvTier t) const { return t == KvTier::Disk ? disk_ : host_; }
  // A host slot is being reused: its block (and snapshot) goes to disk unless disk has it
  // already.
  void spill(const TierIndex::Displaced& d);
  // op (a Save to host slot `host_slot`) also carries the snapshot in primary slot
  // `snapshot_slot`, if the host tier has a snapshot slot to give.
  void save_snapshot(TierOp& op, int32_t host_slot, int32_t snapshot_slot);
  // The spill `op` to disk slot `disk_slot` also writes host snapshot `hs`, if a disk
  // snapshot slot can be had (the least recently used snapshot file is deleted for it).
  void spill_snapshot(TierOp& op, int32_t disk_slot, int32_t hs);
  // A disk snapshot slot for disk slot `disk_slot` (the least recently used snapshot
  // file is deleted for it when none is free); false: none to be had.
  bool attach_disk_snapshot(int32_t disk_slot);
  // A disk slot for a block the disk tier does not hold (the least recently used file is
  // deleted for it when full); -1: none (a colliding hash holds the name, or all pinned).
  int32_t insert_disk(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens);

  TierIndex host_, disk_;
  TierSnapshots host_snaps_, disk_snaps_;
  std::vector<TierOp> ops_;
  std::unordered_map<uint64_t, int32_t> unwritten_;  // hash -> spills of it not run yet
  KvTierStats stats_;
};

}  // namespace troupe::runtime
