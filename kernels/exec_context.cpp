// The fork-join pool behind each ExecContext. Chunks are claimed dynamically from an
// atomic counter by the caller and by whichever workers are awake (shrinking as the
// range runs out: Job), and the caller only waits for chunks that were actually claimed. On a machine where other
// processes hold some cores, a worker that is not scheduled claims nothing and
// costs nothing (a static OpenMP team would make every kernel call wait for it).
// Every index is still computed by exactly one chunk, and kernels keep a fixed
// order within an element, so results do not depend on threads or chunking.
#include "kernels/exec_context.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TROUPE_PAUSE() _mm_pause()
#else
#define TROUPE_PAUSE() ((void)0)
#endif

namespace troupe::kernels {
namespace {

thread_local bool t_inside_pool = false;  // a pool's worker, or a caller running its chunks
thread_local ExecContext* t_bound = nullptr;

// Chunks shrink as the range runs out (guided scheduling): each claim takes
// 1 / (2 · threads) of what is left, in whole multiples of min_chunk. Large chunks first
// keep the per-chunk costs rare (a claim; a decode GEMM's rows starting cold); small ones
// last bound how long one thread waits for the other at the end of the call to about one
// min_chunk, where equal chunks of n / (4 · threads) left up to one of them.
struct Job {
  const FunctionRef<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t min_chunk = 1;
  int64_t threads = 1;
  std::atomic<int64_t> next{0};      // first element not yet claimed
  std::atomic<int64_t> finished{0};  // elements done

  // Claims and runs chunks until none are left.
  void work() {
    for (;;) {
      int64_t begin = next.load(std::memory_order_relaxed), size = 0;
      do {
        if (begin >= n) return;
        size = std::max<int64_t>(1, (n - begin) / (2 * threads * min_chunk)) * min_chunk;
      } while (!next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed));
      const int64_t end = std::min(n, begin + size);
      (*fn)(begin, end);
      finished.fetch_add(end - begin, std::memory_order_release);
    }
  }
};

}  // namespace

struct ExecContext::Pool {
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(const FunctionRef<void(int64_t, int64_t)>& fn, int64_t n, int64_t min_chunk,
           int helpers) {
    bool wake = false;
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job = idle_job();
      job->fn = &fn;
      job->n = n;
      job->min_chunk = min_chunk;
      job->threads = helpers + 1;
      job->next.store(0, std::memory_order_relaxed);
      job->finished.store(0, std::memory_order_relaxed);
      while (static_cast<int>(workers_.size()) < helpers)
        workers_.emplace_back([this] { worker_loop(); });
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
      wake = sleeping_ > 0;
    }
    if (wake) cv_.notify_all();
    t_inside_pool = true;
    job->work();
    t_inside_pool = false;
    // Wait only for chunks someone claimed; yield so a descheduled claimer can finish.
    for (int spins = 0; job->finished.load(std::memory_order_acquire) < n; ++spins) {
      if (spins < 4096) TROUPE_PAUSE();
      else std::this_thread::yield();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (job_ == job) job_.reset();  // fn lives on the caller's stack: drop the reference
  }

 private:
  // A Job no worker holds any more (a late worker may still be looking at an older one),
  // to be reused: steady kernel calls make no allocation. Under mu_, so no worker can
  // take a new reference meanwhile; the acquire fence pairs with the release of the last
  // worker's reference, so its reads of the job are done before the job is rewritten.
  std::shared_ptr<Job> idle_job() {
    for (std::shared_ptr<Job>& j : jobs_) {
      if (j == nullptr) j = std::make_shared<Job>();
      if (j.use_count() == 1) {
        std::atomic_thread_fence(std::memory_order_acquire);
        return j;
      }
    }
    jobs_[0] = std::make_shared<Job>();  // all held by late workers: let them keep theirs
    return jobs_[0];
  }

  // Spins briefly for the next job (kernels come back to back within a forward pass),
  // then sleeps on the condition variable.
  void worker_loop() {
    t_inside_pool = true;
    uint64_t seen = 0;
    for (;;) {
      for (int spins = 0; spins < kSpins && generation_.load(std::memory_order_acquire) == seen;
           ++spins)
        TROUPE_PAUSE();
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleeping_;
        cv_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
        --sleeping_;
        if (stop_) return;
        seen = generation_.load();
        job = job_;
      }
      if (job) job->work();
    }
  }

  static constexpr int kSpins = 20000;  // ~0.1-0.5 ms of pause instructions
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  std::shared_ptr<Job> job_;
  std::shared_ptr<Job> jobs_[8];  // reused (idle_job)
  std::atomic<uint64_t> generation_{0};
  int sleeping_ = 0;
  bool stop_ = false;
};

ExecContext::ExecContext(int threads) : threads_(threads), pool_(std::make_unique<Pool>()) {}
ExecContext::~ExecContext() = default;

int ExecContext::threads() const { return threads_ > 0 ? threads_ : default_num_threads(); }

void ExecContext::parallel_for(int64_t n, int64_t min_chunk,
                               FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int threads = static_cast<int>(std::min<int64_t>(this->threads(), (n + min_chunk - 1) / min_chunk));
  if (threads <= 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  pool_->run(fn, n, min_chunk, threads - 1);
}

ExecContext& current_context() {
  if (t_bound != nullptr) return *t_bound;
  static ExecContext process_default(0);
  return process_default;
}

const ExecContext* bound_context() { return t_bound; }

ScopedExecContext::ScopedExecContext(ExecContext& ctx) : saved_(t_bound) { t_bound = &ctx; }
ScopedExecContext::~ScopedExecContext() { t_bound = saved_; }

}  // namespace troupe::kernels
