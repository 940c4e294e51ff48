#include "runtime/kv_cache/block_hash_map.h"

#include <bit>

#include "kernels/check.h"

namespace troupe::runtime {

BlockHashMap::BlockHashMap(int64_t capacity) : capacity_(capacity) {
  TROUPE_CHECK(capacity >= 0 && capacity <= INT32_MAX, "BlockHashMap: capacity out of range: ", capacity);
  // At most half full, so every probe meets an empty slot soon; at least two slots.
  const uint64_t n = std::bit_ceil(uint64_t(2 * capacity + 2));
  slots_.resize(size_t(n));
  shift_ = 64 - std::countr_zero(n);
}

size_t BlockHashMap::probe(uint64_t key) const {
  size_t i = home(key);
  while (slots_[i].value >= 0 && slots_[i].key != key) i = next(i);
  return i;
}

int32_t BlockHashMap::find(uint64_t key) const { return slots_[probe(key)].value; }

bool BlockHashMap::insert(uint64_t key, int32_t value) {
  TROUPE_CHECK(value >= 0, "BlockHashMap::insert: values are ids >= 0, got ", value);
  const size_t i = probe(key);
  if (slots_[i].value >= 0) return false;
  TROUPE_CHECK(size_ < capacity_, "BlockHashMap: full (", capacity_, " entries)");
  slots_[i] = {key, value};
  ++size_;
  return true;
}

bool BlockHashMap::erase(uint64_t key) {
  size_t hole = probe(key);
  if (slots_[hole].value < 0) return false;
  // Backward shift: an entry further along the run moves into the hole unless its home
  // lies cyclically in (hole, j], where it would no longer be found from its home.
  for (size_t j = next(hole); slots_[j].value >= 0; j = next(j)) {
    const size_t h = home(slots_[j].key);
    const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

}  // namespace troupe::runtime
