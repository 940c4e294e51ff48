// Which blocks of one lower tier (host or disk) carry a window snapshot (issue 14,
// docs/kv-cache.md "Window snapshots in the tiers"). A snapshot moves with its block: the
// primary pool evicts a block with a cached snapshot, the host tier keeps both; a host
// slot reused spills both to one disk file. A tier has fewer snapshot slots than block
// slots (snapshots are ~8x a block on the tiny model, ~50x on flash; the budget split is
// in prepare_engine), so snapshots have their own LRU: attaching one when every slot is
// taken displaces the least recently used one (its block stays). Pure bookkeeping.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kv_cache/slot_lru.h"
#include "runtime/kv_cache/tier_index.h"

namespace troupe::runtime {

class TierSnapshots {
 public:
  // num_slots snapshots for the blocks of a tier of num_owners block slots.
  TierSnapshots(int64_t num_slots, int64_t num_owners);

  // The snapshot slot of tier block slot `owner`, or -1.
  int32_t of(int32_t owner) const { return owner_slot_[size_t(owner)]; }
  // A snapshot slot for `owner`: its own, else a free one, else the least recently used
  // one whose owner is not pinned in `tier` (that owner goes to *displaced, which keeps
  // its block). -1 (no change) when there are no slots or all owners are pinned.
  int32_t attach(int32_t owner, const TierIndex& tier, int32_t* displaced);
  void detach(int32_t owner);  // the owner's block left the tier (or lost its snapshot)
  void touch(int32_t owner);   // a hit restored it

  int64_t num_slots() const { return int64_t(owner_.size()); }
  int64_t num_used() const { return used_; }
  void check_invariants() const;  // throws troupe::Error on a broken list or map

 private:
  std::vector<int32_t> owner_;       // [num_slots] the tier block slot it belongs to, -1: free
  std::vector<int32_t> owner_slot_;  // [num_owners] snapshot slot or -1
  std::vector<int32_t> free_;        // a stack; the lowest slot first
  SlotLru lru_;                      // used slots, oldest first
  int64_t used_ = 0;
};

}  // namespace troupe::runtime
