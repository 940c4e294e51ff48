// One lower tier of the prefix cache (host memory or disk, issue 14, docs/kv-cache.md
// "Host and disk tiers"): which cached blocks it holds, in which of its slots, in LRU
// order. Pure bookkeeping like BlockPool: the bytes sit in TierStorage (host slots) or in
// one file per block (disk), indexed by what is handed out here.
//
//   slot   free    on the free stack
//          used    findable by hash (verified like BlockPool::lookup: parent hash and
//                  token ids), in the LRU list; insert() reuses the least recently used
//                  unpinned one when no slot is free
//   pins   a slot a pending load reads (or a file it opens) is pinned while its
//          admission takes blocks, so the saves those evictions cause never reuse it
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/kv_cache/block_hash_map.h"
#include "runtime/kv_cache/slot_lru.h"

namespace troupe::runtime {

class TierIndex {
 public:
  TierIndex(int64_t num_slots, int64_t block_size);

  // What a slot held when insert() reused it (the caller may move it one tier down).
  struct Displaced {
    int32_t slot = -1;
    uint64_t hash = 0, parent_hash = 0;
    std::vector<int32_t> tokens;  // [block_size]
  };

  // The slot holding a block with this hash whose parent hash and tokens match, or -1.
  int32_t find(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;
  bool contains(uint64_t hash) const { return by_hash_.contains(hash); }
  // Takes a slot for a block not held yet (contains(hash) false): a free one, else the
  // least recently used unpinned one, whose entry goes to *displaced. -1 (and no change)
  // when every slot is pinned.
  int32_t insert(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                 std::optional<Displaced>* displaced);
  void erase(int32_t slot);  // the slot's block is gone (a corrupt file): free it
  void touch(int32_t slot);  // a hit or a re-save: most recently used
  void pin(int32_t slot) { ++slots_[size_t(slot)].pins; }
  void unpin(int32_t slot);
  bool pinned(int32_t slot) const { return slots_[size_t(slot)].pins > 0; }

  uint64_t hash_of(int32_t slot) const { return slots_[size_t(slot)].hash; }
  uint64_t parent_hash_of(int32_t slot) const { return slots_[size_t(slot)].parent_hash; }
  std::span<const int32_t> tokens_of(int32_t slot) const;
  int64_t num_slots() const { return int64_t(slots_.size()); }
  int64_t num_used() const { return num_slots() - int64_t(free_.size()); }
  std::vector<int32_t> lru_order() const;  // used slots, next to be reused first

  void check_invariants() const;  // throws troupe::Error on a broken list or map

 private:
  struct Slot {
    bool used = false;
    int32_t pins = 0;
    uint64_t hash = 0, parent_hash = 0;
  };

  int64_t block_size_;
  std::vector<Slot> slots_;
  std::vector<int32_t> tokens_;  // [num_slots, block_size]
  std::vector<int32_t> free_;    // a stack; the lowest slot first
  BlockHashMap by_hash_;  // at most one entry per slot
  SlotLru lru_;  // used slots, next to be reused first
};

}  // namespace troupe::runtime
