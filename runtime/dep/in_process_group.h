// R ranks of one process exchanging through shared memory: a slot per (sender, receiver)
// and barrier points. all_to_all is two points: everyone deposits, then everyone collects
// (the second keeps a fast rank's next deposit from landing before a slow rank collected
// the last one).
//
// Ranks step in lockstep and make the same exchanges in each step (one MoE layer =
// dispatch + combine), so (step, k-th exchange of the step) names one exchange on every
// rank. abort() fails the rest of the caller's step: ranks waiting in one of its
// exchanges, or entering one later, throw; a rank that already made all of that step's
// exchanges is not touched (the aborter failed after them, nobody waits for it), and the
// next step works again. So a rank that fails anywhere in a step never leaves a peer
// waiting, and the group needs no reset. close() is for a rank that is gone (its actor
// died): every exchange from then on throws, on every rank, in every step.
//
//   InProcessGroup group(3);
//   // on rank r's thread, per step:  Communicator& c = group.communicator(r);
//   c.begin_step();  auto recv = c.all_to_all(std::move(send));  ...
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/dep/communicator.h"

namespace troupe::runtime {

class InProcessGroup {
 public:
  explicit InProcessGroup(int size);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return size_; }
  Communicator& communicator(int rank);

  // A rank left for good: every rank waiting in an exchange, or entering one later,
  // throws with `why`. The group is not usable again (its owner makes a new one).
  void close(const std::string& why);

 private:
  class Rank;
  friend class Rank;
  using Key = std::tuple<int64_t, int64_t, int>;  // step, exchange in the step, half
  struct Point {
    int arrived = 0;
    int left = 0;
    bool open = false;  // every rank arrived
  };
  // Arrives at the barrier point and waits for the others; throws if its step failed.
  void arrive_and_wait(const Key& key);
  void fail_step(int64_t step, const std::string& why);

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Point> points_;
  std::map<int64_t, std::string> failed_;  // step -> why (the last few steps)
  std::string closed_;                     // non-empty: close() was called, why
  std::vector<std::vector<Bytes>> slots_;  // [sender][receiver]
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace troupe::runtime
