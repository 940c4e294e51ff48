// parallel_for and the thread count, on the calling thread's execution context
// (kernels/exec_context.h): a rank's own pool where the rank bound one, else the
// process default.
#include "kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "kernels/exec_context.h"

namespace troupe::kernels {
namespace {

std::atomic<int> g_threads{0};

// glibc answers hardware_concurrency() by reading /sys on every call: look it up once.
int hardware_threads() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

}  // namespace

int default_num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware_threads();
}

int num_threads() { return current_context().threads(); }

void set_num_threads(int n) { g_threads.store(n, std::memory_order_relaxed); }

void parallel_for(int64_t n, int64_t min_chunk, RangeFn fn) {
  current_context().parallel_for(n, min_chunk, fn);
}

}  // namespace troupe::kernels
