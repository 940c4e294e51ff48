// Software prefetch of the weights a decode GEMM reads a little later, into L2.
//
// A decode GEMM streams each weight byte from DRAM once, and its tiles start rows the
// hardware prefetcher has not entered (kernels/cpu/gemm_direct_avx512.h), so the kernels
// fetch the lines they will read a few tiles on. Into L1 (prefetcht0), every such line
// holds one of the core's few L1 miss buffers until it arrives from DRAM, and with them
// busy the in-flight lines, and so one thread's bandwidth, stop growing. prefetcht1 fills
// L2 only, whose miss queue is deeper; the load later finds the line in L2. Measured on a
// Zen 4 (AMD EPYC, 2 vCPUs; docs/kernels-bench.md "Prefetch into L2"): F16 M = 1 at
// K = 1024 went from 12.9 to 19.6 GB/s on one thread; at 2 threads the dense F16 decode
// chain 1.21-1.48x, the AVX-512 Q8_0 / Q4_0 row groups 1.17-1.46x, FP8 1.13-1.77x (M = 1,
// two sweeps). Not everywhere: the AVX2 row-group kernel (its int8 arithmetic is ~its
// DRAM speed per thread) and the int8 FP4 tiles' 1 KiB-ahead fetch were slower, and keep
// prefetcht0.
#pragma once

#include <immintrin.h>

namespace troupe::kernels::cpu {

__attribute__((always_inline)) inline void prefetch_l2(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}

}  // namespace troupe::kernels::cpu
