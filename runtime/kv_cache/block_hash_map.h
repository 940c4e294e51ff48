// Block hash -> id for at most `capacity` entries, in one array allocated up front: open
// addressing with linear probing and backward-shift deletion, so inserting and erasing
// never allocate. The prefix cache publishes a block per block_size tokens of every
// running request; a node-based map took a heap node for each (the decode allocation
// test, issue 13). The keys are chained 64-bit block hashes; a multiplicative step
// spreads them over the table anyway.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::runtime {

class BlockHashMap {
 public:
  explicit BlockHashMap(int64_t capacity);

  int32_t find(uint64_t key) const;           // the value, or -1 if absent
  bool contains(uint64_t key) const { return find(key) >= 0; }
  bool insert(uint64_t key, int32_t value);   // false (no change) if the key is there
  bool erase(uint64_t key);                   // false if absent
  int64_t size() const { return size_; }

  template <class F>  // f(key, value) for every entry, in no particular order
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.value >= 0) f(s.key, s.value);
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = -1;  // -1: empty (values are block or slot ids, >= 0)
  };
  size_t home(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
  size_t probe(uint64_t key) const;  // the key's slot, or the empty one that ends its run

  std::vector<Slot> slots_;  // a power of two, at least twice the capacity
  int shift_;                // 64 - log2(slots_.size())
  int64_t capacity_;
  int64_t size_ = 0;
};

}  // namespace troupe::runtime
