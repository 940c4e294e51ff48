#include "kernels/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace troupe::kernels {
namespace {
std::atomic<int> g_threads{0};
}

// glibc answers hardware_concurrency() by reading /sys on every call, and parallel_for
// asks on every kernel call: look it up once.
int hardware_threads() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware_threads();
}

void set_num_threads(int n) { g_threads.store(n, std::memory_order_relaxed); }

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_chunks = (n + min_chunk - 1) / min_chunk;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace troupe::kernels
