#include "runtime/dep/rank_threads.h"

namespace troupe::runtime {

RankThreads::RankThreads(int n) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::run(const std::function<void(int)>& job) {
  std::unique_lock lock(mu_);
  job_ = &job;
  pending_ = static_cast<int>(threads_.size());
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void RankThreads::loop(int i) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(i);
    std::lock_guard lock(mu_);
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace troupe::runtime
