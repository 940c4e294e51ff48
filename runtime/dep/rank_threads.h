// One thread per rank for the whole life of an in-process DEP engine, so each rank's step
// runs on the same thread every time (its kernel context's caller, its thread_local
// scratch) instead of a thread started per step.
//
//   RankThreads threads(R);
//   threads.run([&](int rank) { step(rank); });   // all R at once; returns when all done
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::runtime {

class RankThreads {
 public:
  explicit RankThreads(int n);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  // Runs job(i) on thread i for every i; returns when every call returned. job must not
  // throw (a rank's failure is its result, not an exception across threads).
  void run(const std::function<void(int)>& job);

 private:
  void loop(int i);

  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace troupe::runtime
