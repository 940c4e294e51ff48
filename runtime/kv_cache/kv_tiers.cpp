#include "runtime/kv_cache/kv_tiers.h"

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

KvTiers::KvTiers(int64_t host_slots, int64_t disk_slots, int64_t block_size)
    : host_(host_slots, block_size), disk_(disk_slots, block_size) {
  // Disk is fed from host slots being reused, so a disk tier needs a host tier above it.
  TROUPE_CHECK(host_slots >= 1, "KvTiers: the host tier needs at least one block, got ",
               host_slots);
}

void KvTiers::on_evicted(int32_t block, uint64_t hash, uint64_t parent_hash,
                         std::span<const int32_t> tokens) {
  if (const int32_t s = host_.find(hash, parent_hash, tokens); s >= 0) {
    host_.touch(s);  // brought back earlier and never changed: the host copy is current
    ++stats_.already_held;
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
  ops_.push_back(std::move(op));
  ++stats_.saves;
}

void KvTiers::spill(const TierIndex::Displaced& d) {
  if (!has_disk()) return;
  if (const int32_t s = disk_.find(d.hash, d.parent_hash, d.tokens); s >= 0) {
    disk_.touch(s);  // its file is current already
    return;
  }
  if (disk_.contains(d.hash)) return;  // a colliding hash holds the file name: drop this one
  std::optional<TierIndex::Displaced> dropped;
  if (disk_.insert(d.hash, d.parent_hash, d.tokens, &dropped) < 0) return;  // all pinned
  if (dropped) {
    TierOp drop;
    drop.kind = TierOpKind::DropFromDisk;
    drop.hash = dropped->hash;
    ops_.push_back(std::move(drop));
    ++stats_.disk_drops;
  }
  TierOp op;
  op.kind = TierOpKind::SpillToDisk;
  op.host_slot = d.slot;
  op.hash = d.hash;
  op.parent_hash = d.parent_hash;
  op.tokens = d.tokens;
  ++unwritten_[d.hash];
  ops_.push_back(std::move(op));
  ++stats_.spills;
}

void KvTiers::ops_done(std::span<const TierOp> ops) {
  for (const TierOp& op : ops) {
    if (op.kind != TierOpKind::SpillToDisk) continue;
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

bool KvTiers::adopt_disk_block(uint64_t hash, uint64_t parent_hash,
                               std::span<const int32_t> tokens) {
  if (!has_disk() || disk_.contains(hash) || disk_.num_used() == disk_.num_slots()) return false;
  std::optional<TierIndex::Displaced> none;
  return disk_.insert(hash, parent_hash, tokens, &none) >= 0;
}

void KvTiers::check_invariants() const {
  host_.check_invariants();
  disk_.check_invariants();
}

}  // namespace troupe::runtime
