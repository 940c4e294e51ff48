// This machine's limits, measured at the start of every bench_kernels run so each
// kernel figure is compared with a baseline taken on the same (noisy, shared) VM.
#pragma once

#include "bench/kernels/bench.h"

namespace troupe::bench {

struct MachineLimits {
  int threads = 1;            // "all threads" below = kernels::num_threads()
  double dram_gbs_1 = 0;      // DRAM read bandwidth, GB/s (sum over a 1 GiB buffer)
  double dram_gbs_all = 0;
  double fp32_gflops_1 = 0;   // AVX-512 fp32 FMA peak (0 without AVX-512)
  double fp32_gflops_all = 0;
  double bf16_gflops_1 = 0;   // vdpbf16ps peak, 2 flops per bf16 pair (0 without AVX512_BF16)
  double bf16_gflops_all = 0;
};

MachineLimits measure_limits(bool quick);
void print_limits(const MachineLimits& l);

// The all-thread limit for a bound, in the unit of the matching rate (GB/s or GFLOP/s).
double limit_for(const MachineLimits& l, Bound b);

}  // namespace troupe::bench
