#include "runtime/kv_cache/tier_snapshots.h"

#include "kernels/check.h"

namespace troupe::runtime {

TierSnapshots::TierSnapshots(int64_t num_slots, int64_t num_owners)
    : owner_(size_t(num_slots), -1), owner_slot_(size_t(num_owners), -1), lru_(num_slots) {
  TROUPE_CHECK(num_slots >= 0 && num_slots <= INT32_MAX && num_owners >= 0,
               "TierSnapshots: slot counts out of range");
  for (int64_t s = num_slots - 1; s >= 0; --s) free_.push_back(int32_t(s));
}

int32_t TierSnapshots::attach(int32_t owner, const TierIndex& tier, int32_t* displaced) {
  *displaced = -1;
  if (const int32_t s = of(owner); s >= 0) {
    lru_.move_to_back(s);
    return s;
  }
  int32_t s = -1;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
    ++used_;
  } else {
    for (int32_t c = lru_.head(); c != -1; c = lru_.next(c))
      if (!tier.pinned(owner_[size_t(c)])) {
        s = c;
        break;
      }
    if (s < 0) return -1;
    *displaced = owner_[size_t(s)];
    owner_slot_[size_t(*displaced)] = -1;
    lru_.unlink(s);
  }
  owner_[size_t(s)] = owner;
  owner_slot_[size_t(owner)] = s;
  lru_.push_back(s);
  return s;
}

void TierSnapshots::detach(int32_t owner) {
  const int32_t s = of(owner);
  if (s < 0) return;
  lru_.unlink(s);
  owner_[size_t(s)] = -1;
  owner_slot_[size_t(owner)] = -1;
  free_.push_back(s);
  --used_;
}

void TierSnapshots::touch(int32_t owner) {
  if (const int32_t s = of(owner); s >= 0) lru_.move_to_back(s);
}

void TierSnapshots::check_invariants() const {
  const int64_t listed = lru_.count_checked("tier snapshot");
  for (int32_t s = lru_.head(); s != -1; s = lru_.next(s)) {
    const int32_t o = owner_[size_t(s)];
    TROUPE_CHECK(o >= 0 && owner_slot_[size_t(o)] == s, "tier snapshot slot ", s,
                 " is listed but its owner does not name it");
  }
  TROUPE_CHECK(listed == used_ && listed + int64_t(free_.size()) == num_slots(),
               "tier snapshots: ", listed, " listed, ", used_, " used, ", free_.size(), " free");
}

}  // namespace troupe::runtime
