#include "runtime/kv_cache/snapshot_table.h"

#include "kernels/check.h"

namespace troupe::runtime {

SnapshotTable::SnapshotTable(int64_t num_slots, int32_t first_slot)
    : first_slot_(first_slot), slots_(size_t(num_slots)) {
  TROUPE_CHECK(num_slots >= 0 && first_slot >= 0, "SnapshotTable: bad slot range");
  // Popped from the back: the lowest slot is handed out first.
  for (int64_t i = num_slots - 1; i >= 0; --i) free_.push_back(int32_t(i));
}

int32_t SnapshotTable::writer_slot(RequestId id, bool* evicted) {
  *evicted = false;
  if (const auto it = writers_.find(id); it != writers_.end()) return first_slot_ + it->second;
  if (free_.empty()) {
    if (lru_.empty()) return -1;
    uncache(lru_.front());
    *evicted = true;
  }
  const int32_t i = free_.back();
  free_.pop_back();
  slots_[size_t(i)].boundary = 0;
  writers_.emplace(id, i);
  return first_slot_ + i;
}

void SnapshotTable::note_written(RequestId id, int64_t boundary) {
  const auto it = writers_.find(id);
  TROUPE_CHECK(it != writers_.end(), "snapshot written for request ", id, " that holds no slot");
  slots_[size_t(it->second)].boundary = boundary;
}

int64_t SnapshotTable::written_boundary(RequestId id) const {
  const auto it = writers_.find(id);
  return it == writers_.end() ? 0 : slots_[size_t(it->second)].boundary;
}

void SnapshotTable::release(RequestId id, int32_t block) {
  const auto it = writers_.find(id);
  if (it == writers_.end()) return;
  const int32_t i = it->second;
  writers_.erase(it);
  if (block < 0 || slots_[size_t(i)].boundary <= 0) {
    free_.push_back(i);
    return;
  }
  if (const auto it = by_block_.find(block); it != by_block_.end() && slots_[size_t(it->second)].pinned) {
    free_.push_back(i);  // a saved prefix's snapshot stays until it is unpinned
    return;
  }
  drop_block(block);  // the newest state of a block wins
  Slot& s = slots_[size_t(i)];
  s.block = block;
  s.lru = lru_.insert(lru_.end(), i);
  by_block_.emplace(block, i);
}

int32_t SnapshotTable::find(int32_t block, int64_t boundary) const {
  const auto it = by_block_.find(block);
  if (it == by_block_.end() || slots_[size_t(it->second)].boundary != boundary) return -1;
  return first_slot_ + it->second;
}

int32_t SnapshotTable::slot_of(int32_t block) const {
  const auto it = by_block_.find(block);
  return it == by_block_.end() ? -1 : first_slot_ + it->second;
}

void SnapshotTable::touch(int32_t block) {
  const auto it = by_block_.find(block);
  if (it == by_block_.end()) return;
  Slot& s = slots_[size_t(it->second)];
  if (!s.pinned) lru_.splice(lru_.end(), lru_, s.lru);
}

bool SnapshotTable::pin(int32_t block) {
  const auto it = by_block_.find(block);
  if (it == by_block_.end()) return false;
  Slot& s = slots_[size_t(it->second)];
  if (s.pinned) return true;
  pinned_.splice(pinned_.end(), lru_, s.lru);
  s.pinned = true;
  return true;
}

void SnapshotTable::unpin(int32_t block) {
  const auto it = by_block_.find(block);
  if (it == by_block_.end() || !slots_[size_t(it->second)].pinned) return;
  Slot& s = slots_[size_t(it->second)];
  lru_.splice(lru_.end(), pinned_, s.lru);  // most recently used: it was just in use
  s.pinned = false;
}

bool SnapshotTable::drop_block(int32_t block) {
  const auto it = by_block_.find(block);
  if (it == by_block_.end()) return false;
  uncache(it->second);
  return true;
}

std::vector<int32_t> SnapshotTable::cached_blocks() const {
  std::vector<int32_t> blocks;
  for (int32_t i : lru_) blocks.push_back(slots_[size_t(i)].block);
  return blocks;
}

std::vector<RequestId> SnapshotTable::writer_ids() const {
  std::vector<RequestId> ids;
  for (const auto& [id, i] : writers_) ids.push_back(id);
  return ids;
}

void SnapshotTable::uncache(int32_t i) {
  Slot& s = slots_[size_t(i)];
  by_block_.erase(s.block);
  (s.pinned ? pinned_ : lru_).erase(s.lru);
  s.pinned = false;
  s.block = -1;
  s.boundary = 0;
  free_.push_back(i);
}

void SnapshotTable::check_invariants() const {
  std::vector<int> seen(slots_.size(), 0);
  for (int32_t i : free_) ++seen[size_t(i)];
  for (const auto& [id, i] : writers_) ++seen[size_t(i)];
  for (int32_t i : pinned_) {
    ++seen[size_t(i)];
    TROUPE_CHECK(slots_[size_t(i)].pinned, "snapshot slot ", i, " is in the pinned list unpinned");
  }
  for (int32_t i : lru_) {
    ++seen[size_t(i)];
    TROUPE_CHECK(!slots_[size_t(i)].pinned, "pinned snapshot slot ", i, " is in the LRU list");
    const auto it = by_block_.find(slots_[size_t(i)].block);
    TROUPE_CHECK(it != by_block_.end() && it->second == i, "snapshot slot ", i,
                 " is in the LRU list but not indexed by its block");
  }
  TROUPE_CHECK(by_block_.size() == lru_.size() + pinned_.size(), "snapshot block index and LRU list disagree");
  for (size_t i = 0; i < seen.size(); ++i)
    TROUPE_CHECK(seen[i] == 1, "snapshot slot ", i, " is in ", seen[i], " states");
}

}  // namespace troupe::runtime
