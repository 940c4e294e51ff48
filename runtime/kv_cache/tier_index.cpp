#include "runtime/kv_cache/tier_index.h"

#include <cstring>

#include "kernels/check.h"

namespace troupe::runtime {

TierIndex::TierIndex(int64_t num_slots, int64_t block_size)
    : block_size_(block_size), slots_(size_t(num_slots)),
      tokens_(size_t(num_slots * block_size)),
      by_hash_(num_slots), lru_(num_slots) {
  TROUPE_CHECK(num_slots >= 0 && num_slots <= INT32_MAX, "TierIndex: num_slots out of range: ",
               num_slots);
  TROUPE_CHECK(block_size >= 1, "TierIndex: block_size must be >= 1, got ", block_size);
  for (int64_t s = num_slots - 1; s >= 0; --s) free_.push_back(int32_t(s));
}

int32_t TierIndex::find(uint64_t hash, uint64_t parent_hash,
                        std::span<const int32_t> tokens) const {
  const int32_t s = by_hash_.find(hash);
  if (s < 0) return -1;
  // As BlockPool::lookup: the 64-bit hash alone could collide; parent and tokens pin it.
  if (slots_[size_t(s)].parent_hash != parent_hash || tokens.size() != size_t(block_size_))
    return -1;
  if (std::memcmp(tokens_of(s).data(), tokens.data(), tokens.size_bytes()) != 0) return -1;
  return s;
}

int32_t TierIndex::insert(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                          std::optional<Displaced>* displaced) {
  TROUPE_CHECK(!contains(hash), "TierIndex::insert: hash already held");
  TROUPE_CHECK(tokens.size() == size_t(block_size_), "TierIndex::insert needs a full block");
  displaced->reset();
  int32_t s = -1;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    for (int32_t c = lru_.head(); c != -1; c = lru_.next(c))
      if (slots_[size_t(c)].pins == 0) {
        s = c;
        break;
      }
    if (s < 0) return -1;
    const Slot& old = slots_[size_t(s)];
    const auto t = tokens_of(s);
    *displaced = Displaced{s, old.hash, old.parent_hash, {t.begin(), t.end()}};
    lru_.unlink(s);
    by_hash_.erase(old.hash);
  }
  Slot& slot = slots_[size_t(s)];
  slot.used = true, slot.hash = hash, slot.parent_hash = parent_hash;
  std::memcpy(tokens_.data() + int64_t(s) * block_size_, tokens.data(), tokens.size_bytes());
  by_hash_.insert(hash, s);
  lru_.push_back(s);
  return s;
}

void TierIndex::erase(int32_t s) {
  Slot& slot = slots_[size_t(s)];
  TROUPE_CHECK(slot.used && slot.pins == 0, "TierIndex::erase of slot ", s,
               " that is free or pinned");
  lru_.unlink(s);
  by_hash_.erase(slot.hash);
  slot.used = false;
  free_.push_back(s);
}

void TierIndex::touch(int32_t s) {
  TROUPE_CHECK(slots_[size_t(s)].used, "TierIndex::touch of free slot ", s);
  lru_.move_to_back(s);
}

void TierIndex::unpin(int32_t s) {
  TROUPE_CHECK(slots_[size_t(s)].pins > 0, "TierIndex::unpin of unpinned slot ", s);
  --slots_[size_t(s)].pins;
}

std::span<const int32_t> TierIndex::tokens_of(int32_t s) const {
  return {tokens_.data() + int64_t(s) * block_size_, size_t(block_size_)};
}

std::vector<int32_t> TierIndex::lru_order() const {
  std::vector<int32_t> order;
  for (int32_t s = lru_.head(); s != -1; s = lru_.next(s)) order.push_back(s);
  return order;
}

void TierIndex::check_invariants() const {
  const int64_t listed = lru_.count_checked("tier");
  for (int32_t s = lru_.head(); s != -1; s = lru_.next(s))
    TROUPE_CHECK(slots_[size_t(s)].used, "free tier slot ", s, " in the LRU list");
  TROUPE_CHECK(listed == num_used() && listed == int64_t(by_hash_.size()), "tier lists ", listed,
               " slots, ", num_used(), " used, ", by_hash_.size(), " hashes");
  by_hash_.for_each([&](uint64_t h, int32_t s) {
    TROUPE_CHECK(slots_[size_t(s)].used && slots_[size_t(s)].hash == h, "stale tier hash of slot ",
                 s);
  });
}

}  // namespace troupe::runtime
