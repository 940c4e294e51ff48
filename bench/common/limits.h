// This machine's limits, measured at the start of every benchmark run (bench_kernels,
// `troupe bench forward`) so each figure is compared with a baseline taken on the same
// (noisy, shared) VM.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dispatch.h"  // CpuPath

namespace troupe::bench {

// The machine limit a figure is judged against.
enum class Bound : uint8_t {
  Memory,  // bytes / DRAM read bandwidth (all threads)
  Fp32,    // flops / the widest fp32 FMA's peak (all threads)
  Bf16,    // flops / AVX512_BF16 dot peak; the fp32 FMA peak on CPUs without one
  Int8,    // ops / the widest int8 multiply-add's peak (2 ops per product)
};

// Peaks of the instructions this CPU has, each with 1 and all threads. A probe the CPU
// cannot run is left out (never reported as 0): an AVX2 machine gets the 256-bit FMA
// and vpmaddubsw peaks, an AVX-512 one also the 512-bit FMA, vdpbf16ps and vpdpbusd, an
// AMX one the int8 tiles' tdpbusd.
struct Peak {
  const char* what = "";  // "fp32 FMA (avx512)", ...
  double gflops_1 = 0;    // GFLOP/s (GOP/s for int8) with 1 thread
  double gflops_all = 0;
};

struct MachineLimits {
  int threads = 1;        // "all threads" below = kernels::num_threads()
  double dram_gbs_1 = 0;  // DRAM read bandwidth, GB/s (sum over a 1 GiB buffer)
  double dram_gbs_all = 0;
  Peak fp32;  // the widest fp32 FMA the CPU has (scalar-free SSE2 loop without AVX2)
  Peak bf16;  // vdpbf16ps, 2 flops per bf16 pair (what empty: no AVX512_BF16)
  Peak int8;  // AMX-INT8 tiles, else vpdpbusd (AVX512_VNNI) or vpmaddubsw+vpmaddwd (AVX2)
  Peak int8_vnni;  // vpdpbusd as well, when the widest is AMX
  Peak fp32_avx2;  // the 256-bit FMA as well, when the widest is 512-bit
  Peak int8_avx2;  // vpmaddubsw+vpmaddwd as well, when the widest is vpdpbusd or AMX
};

// Runs the probes with 1 and kernels::num_threads() threads; leaves the thread count
// at its default (set_num_threads(0)), so a caller with its own count sets it again.
MachineLimits measure_limits(bool quick);
void print_limits(const MachineLimits& l);

const char* bound_name(Bound b);  // "DRAM", "fp32", "bf16": the "% of limit" column's tag

// The all-thread limit for a bound, in the unit of the matching rate (GB/s or GFLOP/s).
double limit_for(const MachineLimits& l, Bound b);

// The same for a figure of the given CPU path. The AVX2 path on a machine with AVX-512
// runs 256-bit FMAs and vpmaddubsw, never the 512-bit units: it is judged against the
// AVX2 probes (fp32 FMA (avx2) for its f32 and bf16 precisions, which both run f32 FMAs;
// int8 dot (avx2)), as it would be on an AVX2-only machine, and bound_tag says so
// ("int8 avx2"). Every other path, and AVX2 on an AVX2-only machine, gets limit_for(l, b).
double limit_for(const MachineLimits& l, Bound b, kernels::CpuPath path);
std::string bound_tag(const MachineLimits& l, Bound b, kernels::CpuPath path);

}  // namespace troupe::bench
