// An intrusive LRU list over slot indices [0, n): O(1) unlink and append, oldest first.
// Shared by the lower tiers' block slots (TierIndex) and snapshot slots (TierSnapshots).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::runtime {

class SlotLru {
 public:
  explicit SlotLru(int64_t n) : prev_(size_t(n), -1), next_(size_t(n), -1) {}

  int32_t head() const { return head_; }  // the least recently used slot, -1 if empty
  int32_t next(int32_t s) const { return next_[size_t(s)]; }
  int32_t prev(int32_t s) const { return prev_[size_t(s)]; }
  void unlink(int32_t s) {
    (prev(s) == -1 ? head_ : next_[size_t(prev(s))]) = next(s);
    (next(s) == -1 ? tail_ : prev_[size_t(next(s))]) = prev(s);
    prev_[size_t(s)] = next_[size_t(s)] = -1;
  }
  void push_back(int32_t s) {
    prev_[size_t(s)] = tail_, next_[size_t(s)] = -1;
    (tail_ == -1 ? head_ : next_[size_t(tail_)]) = s;
    tail_ = s;
  }
  void move_to_back(int32_t s) { unlink(s), push_back(s); }
  // Slots in the list, checked for broken links and cycles (throws troupe::Error).
  int64_t count_checked(const char* what) const;

 private:
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;
};

}  // namespace troupe::runtime
