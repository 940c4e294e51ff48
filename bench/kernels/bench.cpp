// Registry and timing loop of the kernel benchmark harness (bench.h).
#include "bench/kernels/bench.h"

#include "bench/common/stats.h"

namespace troupe::bench {
namespace {

std::vector<Benchmark>& mutable_registry() {
  static std::vector<Benchmark> r;
  return r;
}

}  // namespace

int add(std::string name, BenchFn fn) {
  mutable_registry().push_back({std::move(name), std::move(fn)});
  return 0;
}

const std::vector<Benchmark>& registry() {
  return mutable_registry();
}

void State::run(const std::function<void()>& fn) {
  // Budgets keep a full run of all families to a few minutes on 2 cores.
  const double budget = quick_ ? 0.05 : 0.25;
  const size_t min_reps = quick_ ? 3 : 5;
  constexpr size_t kMaxReps = 10000;
  path_ = kernels::active_cpu_path();
  fn();  // warm-up: page faults, caches, thread pool start
  seconds_.clear();
  const double start = now_seconds();
  while (seconds_.size() < kMaxReps &&
         (seconds_.size() < min_reps || now_seconds() - start < budget)) {
    const double t0 = now_seconds();
    fn();
    seconds_.push_back(now_seconds() - t0);
  }
}

}  // namespace troupe::bench
