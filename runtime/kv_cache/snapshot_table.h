// Who holds which SWA window snapshot slot (issue 14, docs/kv-cache.md "Window
// snapshots"). A snapshot is a copy of one request's SWA rings, ring positions and
// compressor carry taken right after one of its chunks ended on a block boundary B: the
// per-request state a prefix hit at B lacks. Pure bookkeeping, like the rest of
// kv_cache/: the bytes sit in PagedKvStorage slots [first_slot, first_slot + n).
//
// Every slot is in exactly one state:
//
//   free      held by nobody
//   writing   held by a running request; the executor copies the request's rings into
//             it whenever one of its chunks ends on a block boundary, and `boundary` is
//             the last such boundary the scheduler saw completed (0: none yet)
//   cached    attached to the prefix-cache block that ends at `boundary` (the request
//             ended), in LRU order; dropped when that block is evicted, or when a
//             writer needs a slot and none is free (least recently used first)
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace troupe::runtime {

using RequestId = int64_t;

class SnapshotTable {
 public:
  SnapshotTable(int64_t num_slots, int32_t first_slot);

  // The slot request `id` writes into: the one it holds, else a free one, else the
  // least recently used cached one (*evicted set true); -1 when every slot is being
  // written by other requests.
  int32_t writer_slot(RequestId id, bool* evicted);
  // The writer's slot holds its state at `boundary` now (the chunk that wrote it ran).
  void note_written(RequestId id, int64_t boundary);
  // The last boundary request `id` wrote, 0 if none (or it holds no slot).
  int64_t written_boundary(RequestId id) const;
  // The writer ends: its snapshot becomes the cached one of `block` (replacing an older
  // one there), or with block < 0 its slot is freed. No-op for a request with no slot.
  void release(RequestId id, int32_t block);

  // The storage slot of `block`'s snapshot if it holds the state at `boundary`, or -1.
  int32_t find(int32_t block, int64_t boundary) const;
  // The storage slot of `block`'s cached snapshot (at the block's end boundary), or -1.
  int32_t slot_of(int32_t block) const;
  void touch(int32_t block);         // a hit restored it: most recently used
  bool drop_block(int32_t block);    // the block was evicted: its snapshot goes too
  // KV save (docs/kv-cache.md "Saved prefixes"): `block`'s cached snapshot leaves the LRU
  // list, so no writer reuses it and no newer snapshot of that block replaces it, until
  // unpin(). False: the block has no cached snapshot.
  bool pin(int32_t block);
  void unpin(int32_t block);
  int64_t num_pinned() const { return int64_t(pinned_.size()); }

  int64_t num_slots() const { return int64_t(slots_.size()); }
  int64_t num_cached() const { return int64_t(by_block_.size()); }
  int64_t num_writing() const { return int64_t(writers_.size()); }
  int64_t num_free() const { return int64_t(free_.size()); }
  // Blocks with a cached snapshot, least recently used first (for tests and invariants).
  std::vector<int32_t> cached_blocks() const;
  std::vector<RequestId> writer_ids() const;  // requests holding a slot (for invariants)

  void check_invariants() const;  // throws troupe::Error on a slot in two states

 private:
  struct Slot {
    int64_t boundary = 0;
    int32_t block = -1;  // cached: the block it belongs to
    bool pinned = false;  // in pinned_, not lru_
    std::list<int32_t>::iterator lru;
  };
  void uncache(int32_t i);  // cached slot i -> free

  int32_t first_slot_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;                       // slot indices, a stack
  std::unordered_map<RequestId, int32_t> writers_;  // request -> slot index
  std::unordered_map<int32_t, int32_t> by_block_;   // block -> slot index (cached)
  std::list<int32_t> lru_;                          // cached slot indices, oldest first
  std::list<int32_t> pinned_;                       // cached and pinned slot indices
};

}  // namespace troupe::runtime
