// The minimal in-process transport of `troupe bench dp-sync`: one mailbox per rank thread,
// a mutex-guarded vector that the owner drains whole. Not the actors' mailboxes: it
// prices the schedule, not CAF. An empty mailbox is polled through an atomic count,
// without the lock, and its owner waits in one of two ways:
//   spin   yield and poll again (no system call on the sender's side)
//   block  sleep on the count (C++20 atomic wait, a futex); a sender wakes it only when
//          it is asleep. With more rank threads than cores, only ranks that have mail run.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::bench {

enum class MailWait { Spin, Block };

template <typename M>
class InprocMailbox {
 public:
  void push(M m) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(m));
      count_.store(items_.size());
    }
    if (sleeping_.load()) count_.notify_one();  // seq_cst: pairs with wait_for_mail
  }

  // Moves every waiting message into `out` (cleared first); false when there was none.
  bool drain(std::vector<M>& out) {
    out.clear();
    if (count_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(items_);
    count_.store(0);
    return !out.empty();
  }

  // Returns when there may be mail (or interrupt() was called); spurious returns are fine.
  void wait_for_mail(MailWait how) {
    if (how == MailWait::Spin) {
      std::this_thread::yield();
      return;
    }
    // Either the sender sees sleeping_ and notifies, or this thread sees its count.
    sleeping_.store(true);
    count_.wait(0);
    sleeping_.store(false);
  }

  // Wakes the owner from wait_for_mail without mail (the run is aborted).
  void interrupt() {
    std::lock_guard<std::mutex> lock(mu_);
    count_.store(items_.size() + 1);
    count_.notify_all();
  }

 private:
  std::mutex mu_;
  std::vector<M> items_;
  std::atomic<size_t> count_{0};  // items_.size(), readable without the lock
  std::atomic<bool> sleeping_{false};
};

}  // namespace troupe::bench
