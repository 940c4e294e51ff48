#include "runtime/kv_cache/kv_tiers.h"

#include <algorithm>
#include <utility>

#include "kernels/check.h"

namespace troupe::runtime {

const char* kv_tier_name(KvTier t) {
  switch (t) {
    case KvTier::Primary: return "primary";
    case KvTier::Host: return "host";
    case KvTier::Disk: return "disk";
  }
  return "?";
}

KvTiers::KvTiers(int64_t host_slots, int64_t disk_slots, int64_t block_size,
                 int64_t host_snapshots, int64_t disk_snapshots)
    : host_(host_slots, block_size),
      disk_(disk_slots, block_size),
      host_snaps_(std::min(host_snapshots, host_slots), host_slots),
      disk_snaps_(std::min(disk_snapshots, disk_slots), disk_slots) {
  // Disk is fed from host slots being reused, so a disk tier needs a host tier above it.
  TROUPE_CHECK(host_slots >= 1, "KvTiers: the host tier needs at least one block, got ",
               host_slots);
}

void KvTiers::on_evicted(int32_t block, uint64_t hash, uint64_t parent_hash,
                         std::span<const int32_t> tokens, int32_t snapshot_slot) {
  if (const int32_t s = host_.find(hash, parent_hash, tokens); s >= 0) {
    host_.touch(s);  // brought back earlier and never changed: the host copy is current
    ++stats_.already_held;
    if (snapshot_slot < 0) return;
    // A snapshot taken since (the newest state at this boundary wins): it alone is saved.
    TierOp op;
    op.kind = TierOpKind::SaveToHost;
    op.host_slot = s;
    op.hash = hash;
    save_snapshot(op, s, snapshot_slot);
    if (op.host_snapshot >= 0) ops_.push_back(std::move(op));
    return;
  }
  if (host_.contains(hash)) {  // another block under a colliding hash: keep that one
    ++stats_.lost;
    return;
  }
  std::optional<TierIndex::Displaced> displaced;
  const int32_t slot = host_.insert(hash, parent_hash, tokens, &displaced);
  if (slot < 0) {
    ++stats_.lost;
    return;
  }
  if (displaced) spill(*displaced);  // before the save below overwrites the slot
  TierOp op;
  op.kind = TierOpKind::SaveToHost;
  op.block = block;
  op.host_slot = slot;
  op.hash = hash;
  if (snapshot_slot >= 0) save_snapshot(op, slot, snapshot_slot);
  ops_.push_back(std::move(op));
  ++stats_.saves;
}

void KvTiers::save_snapshot(TierOp& op, int32_t host_slot, int32_t snapshot_slot) {
  int32_t displaced = -1;
  const int32_t hs = host_snaps_.attach(host_slot, host_, &displaced);
  if (hs < 0) return;  // no snapshot slots on host: the snapshot is lost with the eviction
  stats_.snapshot_displaced[int(KvTier::Host)] += displaced >= 0;
  op.snapshot_slot = snapshot_slot;
  op.host_snapshot = hs;
  ++stats_.snapshot_saves;
}

void KvTiers::spill(const TierIndex::Displaced& d) {
  // The spill op below reads the host snapshot before a later save reuses its slot.
  const int32_t hs = host_snaps_.of(d.slot);
  host_snaps_.detach(d.slot);
  if (!has_disk()) return;
  TierOp op;
  op.kind = TierOpKind::SpillToDisk;
  op.host_slot = d.slot;
  op.hash = d.hash;
  op.parent_hash = d.parent_hash;
  op.tokens = d.tokens;
  if (const int32_t s = disk_.find(d.hash, d.parent_hash, d.tokens); s >= 0) {
    disk_.touch(s);  // its file holds this block already
    if (hs < 0) return;
    spill_snapshot(op, s, hs);  // rewritten with the newer snapshot
    if (op.host_snapshot < 0) return;
  } else {
    const int32_t slot = insert_disk(d.hash, d.parent_hash, d.tokens);
    if (slot < 0) return;
    if (hs >= 0) spill_snapshot(op, slot, hs);
  }
  ++unwritten_[d.hash];
  ops_.push_back(std::move(op));
  ++stats_.spills;
}

int32_t KvTiers::insert_disk(uint64_t hash, uint64_t parent_hash,
                             std::span<const int32_t> tokens) {
  if (disk_.contains(hash)) return -1;  // a colliding hash holds the file name: drop this one
  std::optional<TierIndex::Displaced> dropped;
  const int32_t slot = disk_.insert(hash, parent_hash, tokens, &dropped);
  if (slot < 0) return -1;  // all pinned
  if (dropped) {
    disk_snaps_.detach(slot);  // the dropped file's snapshot goes with it
    TierOp drop;
    drop.kind = TierOpKind::DropFromDisk;
    drop.hash = dropped->hash;
    ops_.push_back(std::move(drop));
    ++stats_.disk_drops;
  }
  return slot;
}

void KvTiers::spill_snapshot(TierOp& op, int32_t disk_slot, int32_t hs) {
  if (!attach_disk_snapshot(disk_slot)) return;
  op.host_snapshot = hs;
  ++stats_.snapshot_spills;
}

bool KvTiers::attach_disk_snapshot(int32_t disk_slot) {
  int32_t displaced = -1;
  if (disk_snaps_.attach(disk_slot, disk_, &displaced) < 0) return false;  // none, or all pinned
  if (displaced >= 0) {
    // A file's snapshot cannot be cut out in place: the whole file goes, so the disk
    // tier never holds more snapshot bytes than its share.
    TierOp drop;
    drop.kind = TierOpKind::DropFromDisk;
    drop.hash = disk_.hash_of(displaced);
    disk_.erase(displaced);
    ops_.push_back(std::move(drop));
    ++stats_.snapshot_displaced[int(KvTier::Disk)];
  }
  return true;
}

void KvTiers::drop_disk(int32_t slot) {
  ++stats_.bad_files;
  if (disk_.pinned(slot)) return;
  disk_snaps_.detach(slot);
  disk_.erase(slot);
}

int32_t KvTiers::pin_disk(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) {
  const int32_t slot = disk_.find(hash, parent_hash, tokens);
  if (slot >= 0) disk_.pin(slot);
  return slot;
}

void KvTiers::unpin_disk(int32_t slot, uint64_t hash) {
  if (disk_.pinned(slot) && disk_.hash_of(slot) == hash) disk_.unpin(slot);
}

int32_t KvTiers::write_pinned(int32_t block, uint64_t hash, uint64_t parent_hash,
                              std::span<const int32_t> tokens, int32_t snapshot_slot) {
  if (!has_disk()) return -1;
  int32_t slot = disk_.find(hash, parent_hash, tokens);
  const bool held = slot >= 0;
  if (!held) slot = insert_disk(hash, parent_hash, tokens);
  if (slot < 0) return -1;
  disk_.pin(slot);  // before the snapshot's attach: it never displaces its own file
  disk_.touch(slot);
  TierOp op;
  op.kind = TierOpKind::WriteToDisk;
  op.block = block;
  op.hash = hash;
  op.parent_hash = parent_hash;
  op.tokens.assign(tokens.begin(), tokens.end());
  if (snapshot_slot >= 0 && attach_disk_snapshot(slot)) op.snapshot_slot = snapshot_slot;
  // Its file holds this block already, without a snapshot to add: nothing to write.
  if (held && op.snapshot_slot < 0) return slot;
  ++unwritten_[hash];
  ops_.push_back(std::move(op));
  return slot;
}

void KvTiers::ops_done(std::span<const TierOp> ops) {
  for (const TierOp& op : ops) {
    if (op.kind != TierOpKind::SpillToDisk && op.kind != TierOpKind::WriteToDisk) continue;
    const auto it = unwritten_.find(op.hash);
    if (it != unwritten_.end() && --it->second == 0) unwritten_.erase(it);
  }
}

std::optional<TierSource> KvTiers::find(uint64_t hash, uint64_t parent_hash,
                                        std::span<const int32_t> tokens) {
  if (const int32_t s = host_.find(hash, parent_hash, tokens); s >= 0)
    return TierSource{KvTier::Host, s};
  if (const int32_t s = disk_.find(hash, parent_hash, tokens); s >= 0) {
    // Its spill is in a plan not run yet (the host slot it came from is reused): a miss
    // this time, not a bad file.
    if (unwritten_.count(hash)) {
      ++stats_.unwritten_misses;
      return std::nullopt;
    }
    return TierSource{KvTier::Disk, s};
  }
  return std::nullopt;
}

void KvTiers::load(const TierSource& src, int32_t block, std::vector<uint8_t> payload) {
  TierIndex& idx = index(src.tier);
  TierOp op;
  op.kind = src.tier == KvTier::Disk ? TierOpKind::LoadFromDisk : TierOpKind::LoadFromHost;
  op.block = block;
  op.host_slot = src.tier == KvTier::Host ? src.slot : -1;
  op.hash = idx.hash_of(src.slot);
  op.parent_hash = idx.parent_hash_of(src.slot);
  op.payload = std::move(payload);
  idx.touch(src.slot);
  ops_.push_back(std::move(op));
  ++stats_.loads[int(src.tier)];
}

std::optional<TierSource> KvTiers::find_snapshot(uint64_t hash, uint64_t parent_hash,
                                                 std::span<const int32_t> tokens) const {
  if (const int32_t s = host_.find(hash, parent_hash, tokens); s >= 0 && host_snaps_.of(s) >= 0)
    return TierSource{KvTier::Host, s};
  if (const int32_t s = disk_.find(hash, parent_hash, tokens);
      s >= 0 && disk_snaps_.of(s) >= 0 && !unwritten_.count(hash))
    return TierSource{KvTier::Disk, s};
  return std::nullopt;
}

void KvTiers::load_snapshot(const TierSource& src, int32_t ring_slot, std::vector<uint8_t> payload) {
  TierOp op;
  op.kind = TierOpKind::LoadSnapshot;
  op.ring_slot = ring_slot;
  if (src.tier == KvTier::Host) {
    op.host_snapshot = host_snaps_.of(src.slot);
    TROUPE_CHECK(op.host_snapshot >= 0, "load_snapshot: host slot ", src.slot, " has no snapshot");
    host_snaps_.touch(src.slot);
  } else {
    TROUPE_CHECK(!payload.empty(), "load_snapshot from disk without the file's snapshot");
    disk_snaps_.touch(src.slot);
  }
  op.hash = index(src.tier).hash_of(src.slot);
  op.payload = std::move(payload);
  ops_.push_back(std::move(op));
  ++stats_.snapshot_loads[int(src.tier)];
}

bool KvTiers::adopt_disk_block(uint64_t hash, uint64_t parent_hash,
                               std::span<const int32_t> tokens, bool has_snapshot) {
  if (!has_disk() || disk_.contains(hash) || disk_.num_used() == disk_.num_slots()) return false;
  if (has_snapshot && disk_snaps_.num_used() == disk_snaps_.num_slots()) return false;
  std::optional<TierIndex::Displaced> none;
  const int32_t s = disk_.insert(hash, parent_hash, tokens, &none);
  if (s < 0) return false;
  int32_t displaced = -1;
  if (has_snapshot) disk_snaps_.attach(s, disk_, &displaced);
  return true;
}

void KvTiers::check_invariants() const {
  host_.check_invariants();
  disk_.check_invariants();
  host_snaps_.check_invariants();
  disk_snaps_.check_invariants();
}

}  // namespace troupe::runtime
