// bench_kernels: microbenchmarks for the kernel families, reported as a median and a
// spread over repeats, next to this machine's limits measured in the same run (DRAM
// read bandwidth, fp32 FMA peak, AVX512_BF16 dot peak). Figures only, never pass/fail.
//
// Registering a benchmark is one line per benchmark, at namespace scope in
// bench/kernels/<family>_bench.cpp (the CMake glob picks the file up):
//
//   TROUPE_BENCH("norm/rms/decode/1x5120", [](troupe::bench::State& s) {
//     ...allocate and fill inputs here (not timed)...
//     s.shape = "M=1 N=5120";            // free text for the table
//     s.flops = 4.0 * 5120;              // per call; 0 hides GFLOP/s
//     s.bytes = 2 * 5120 * 4;            // per call, bytes that must come from memory
//     s.bound = troupe::bench::Bound::Memory;  // which limit the "% limit" column uses
//     s.run([&] { troupe::kernels::rms_norm(p); });  // timed: warm-up, then repeats
//   });
//
// Names are "family/op/variant"; `bench_kernels --filter SUBSTRING` runs the matching
// ones. A family that registers a table of cases can call troupe::bench::add(name, fn)
// in a loop from one static initializer instead (bench/kernels/gemm_bench.cpp does).
// Use s.quick() to shrink a case under --quick, s.full() for cases only run under
// --full (call s.skip("needs --full") to leave them out), and s.skip(reason) when the
// machine cannot run a case. Benchmarks use all threads (kernels::num_threads()).
//
// Decode-like (memory-bound) cases must stream more bytes than the last-level cache
// holds (or rotate over several copies of their inputs), or they measure the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/common/limits.h"  // Bound
#include "kernels/dispatch.h"     // CpuPath

namespace troupe::bench {

class State {
 public:
  State(bool quick, bool full) : quick_(quick), full_(full) {}

  std::string shape;  // shown in the table
  double flops = 0;   // per call
  double bytes = 0;   // per call
  Bound bound = Bound::Memory;
  // A memory-bound case's arithmetic: its share of this peak is printed beside where its
  // flops at the peak would take longer than its bytes at DRAM speed.
  Bound compute = Bound::Fp32;

  bool quick() const { return quick_; }
  bool full() const { return full_; }
  void skip(std::string reason) { skipped_ = std::move(reason); }

  // Runs fn once to warm up, then repeatedly until a time budget (shorter under
  // --quick) and a minimum repeat count are met; each call is timed on its own.
  void run(const std::function<void()>& fn);

  const std::vector<double>& seconds() const { return seconds_; }
  const std::string& skipped() const { return skipped_; }
  // The CPU path active while run() timed fn (a case's ScopedCpuPath): its figures are
  // judged against that path's limits (limit_for).
  kernels::CpuPath path() const { return path_; }

 private:
  bool quick_;
  bool full_;
  std::string skipped_;
  std::vector<double> seconds_;
  kernels::CpuPath path_ = kernels::CpuPath::Portable;
};

using BenchFn = std::function<void(State&)>;

struct Benchmark {
  std::string name;
  BenchFn fn;
};

// Adds a benchmark to the registry; returns a value so it can initialize a static.
int add(std::string name, BenchFn fn);
const std::vector<Benchmark>& registry();

}  // namespace troupe::bench

#define TROUPE_BENCH_CAT2(a, b) a##b
#define TROUPE_BENCH_CAT(a, b) TROUPE_BENCH_CAT2(a, b)
#define TROUPE_BENCH(name, ...)                                                 \
  [[maybe_unused]] static const int TROUPE_BENCH_CAT(troupe_bench_, __LINE__) = \
      ::troupe::bench::add(name, __VA_ARGS__)
