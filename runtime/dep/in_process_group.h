// R ranks of one process exchanging through shared memory: a slot per (sender, receiver)
// and a barrier with abort. all_to_all is two barrier phases: everyone deposits, then
// everyone collects (the second phase keeps a fast rank's next deposit from landing
// before a slow rank collected the last one).
//
//   InProcessGroup group(3);
//   // on rank r's thread:  auto recv = group.communicator(r).all_to_all(std::move(send));
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
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

  // Clears an abort once every rank has left the failed step (the caller knows: it joins
  // the ranks' step before starting the next), so the group serves the next step.
  void reset();
  bool aborted() const;

 private:
  class Rank;
  friend class Rank;
  // Waits until all ranks arrived at this phase; throws if the group is aborted.
  void arrive_and_wait();

  const int size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  std::string abort_why_;  // non-empty: aborted
  std::vector<std::vector<Bytes>> slots_;  // [sender][receiver]
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace troupe::runtime
