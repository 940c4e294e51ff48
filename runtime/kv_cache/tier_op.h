// A copy between the primary pool and a lower tier that the bookkeeping (KvTiers) decided
// and the executor carries out, in plan order, before the step's forward (TierStorage::
// apply). They travel in the StepPlan because only the rank touches the bytes, and plans
// run in the order they were made, so every op sees the bytes the ops before it left.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::runtime {

enum class TierOpKind : uint8_t {
  SaveToHost,    // primary block -> host slot (the block was evicted; its bytes are intact
                 // until a later op or forward of this plan writes it)
  SpillToDisk,   // host slot -> the file of `hash` (the host slot is about to be reused)
  DropFromDisk,  // delete the file of `hash` (the disk tier is full)
  LoadFromHost,  // host slot -> primary block (a prefix hit)
  LoadFromDisk,  // payload -> primary block (a prefix hit): the file was read and checked
                 // when the hit was found, so the rank never meets a bad file mid-step
  LoadSnapshot,  // host snapshot slot (or payload, from disk) -> ring slot: a hit at the
                 // boundary of a block a lower tier holds with its window snapshot
  WriteToDisk,   // primary block (+ the snapshot in primary storage slot snapshot_slot, if
                 // >= 0) -> the file of `hash`: a saved prefix's pinned block (KV save)
};

// Window snapshots move with their block (docs/kv-cache.md "Window snapshots in the
// tiers"): a Save with snapshot_slot >= 0 also copies that primary storage slot's snapshot
// to host_snapshot (block -1: the host holds the block already, the snapshot alone is
// saved); a Spill with host_snapshot >= 0 writes that snapshot into the block's file.
struct TierOp {
  TierOpKind kind = TierOpKind::SaveToHost;
  int32_t block = -1;      // primary block id (Save source, Load destination)
  int32_t host_slot = -1;  // Save destination, Spill and LoadFromHost source
  int32_t snapshot_slot = -1;  // Save: the primary storage slot of the block's snapshot
  int32_t host_snapshot = -1;  // host snapshot slot: Save destination, Spill and Load source
  int32_t ring_slot = -1;      // LoadSnapshot destination: the admitted request's ring slot
  uint64_t hash = 0;       // the block's chained hash: names its file
  uint64_t parent_hash = 0;
  std::vector<int32_t> tokens;   // [block_size] Spill, WriteToDisk: the file header's
  std::vector<uint8_t> payload;  // [block bytes] LoadFromDisk: the checked file's rows;
                                 // [snapshot bytes] LoadSnapshot from disk: its snapshot
};

}  // namespace troupe::runtime
