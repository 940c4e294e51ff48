// This machine's limits, measured at the start of every benchmark run (bench_kernels,
// `troupe bench forward`) so each figure is compared with a baseline taken on the same
// (noisy, shared) VM.
#pragma once

#include <cstdint>

namespace troupe::bench {

// The machine limit a figure is judged against.
enum class Bound : uint8_t {
  Memory,  // bytes / DRAM read bandwidth (all threads)
  Fp32,    // flops / fp32 AVX-512 FMA peak (all threads)
  Bf16,    // flops / AVX512_BF16 dot peak (all threads)
};

struct MachineLimits {
  int threads = 1;        // "all threads" below = kernels::num_threads()
  double dram_gbs_1 = 0;  // DRAM read bandwidth, GB/s (sum over a 1 GiB buffer)
  double dram_gbs_all = 0;
  double fp32_gflops_1 = 0;  // AVX-512 fp32 FMA peak (0 without AVX-512)
  double fp32_gflops_all = 0;
  double bf16_gflops_1 = 0;  // vdpbf16ps peak, 2 flops per bf16 pair (0 without AVX512_BF16)
  double bf16_gflops_all = 0;
};

// Runs the probes with 1 and kernels::num_threads() threads; leaves the thread count
// at its default (set_num_threads(0)), so a caller with its own count sets it again.
MachineLimits measure_limits(bool quick);
void print_limits(const MachineLimits& l);

const char* bound_name(Bound b);  // "DRAM", "fp32", "bf16": the "% of limit" column's tag

// The all-thread limit for a bound, in the unit of the matching rate (GB/s or GFLOP/s).
double limit_for(const MachineLimits& l, Bound b);

}  // namespace troupe::bench
