// Measures DRAM read bandwidth and the fp32 / bf16 arithmetic peaks with 1 and all
// threads. The AVX-512 loops carry their own target attributes (bench files are built
// without -mavx512*) and run only after a run-time feature check.
#include "bench/common/limits.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench/common/stats.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace troupe::bench {
namespace {

using kernels::parallel_for;

volatile float g_sink;  // keeps the measured loops from being optimized away

// (_mm512_reduce_add_ps trips -Wuninitialized inside GCC 12's own header.)
__attribute__((target("avx512f"))) float hsum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float sum_portable(const float* p, int64_t n) {
  float part[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) part[j] += p[i + j];
  float s = 0;
  for (float v : part) s += v;
  return s;
}

// Best of `passes` full reads of the buffer with `threads` threads, in GB/s.
double read_bandwidth(const float* buf, int64_t n, int threads, int passes) {
  kernels::set_num_threads(threads);
  const bool avx512 = kernels::cpu_features().has_avx512();
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::atomic<float> total{0};
    const double t0 = now_seconds();
    parallel_for(n / 64, 1 << 16, [&](int64_t b, int64_t e) {
      const float s = avx512 ? sum_avx512(buf + b * 64, (e - b) * 64)
                             : sum_portable(buf + b * 64, (e - b) * 64);
      total.fetch_add(s);
    });
    const double dt = now_seconds() - t0;
    g_sink = total.load();
    best = std::max(best, static_cast<double>(n) * sizeof(float) / dt / 1e9);
  }
  kernels::set_num_threads(0);
  return best;
}

constexpr int kChains = 16;  // independent accumulators: covers FMA latency x pipes

__attribute__((target("avx512f,fma"))) float fma_loop(int64_t iters) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return hsum(s);
}

__attribute__((target("avx512f,avx512bf16"))) float bf16_loop(int64_t iters) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return hsum(s);
}

// GFLOP/s of `loop` (flops_per_iter per iteration) run on `threads` threads at once.
double peak(float (*loop)(int64_t), double flops_per_iter, int threads, int64_t iters) {
  kernels::set_num_threads(threads);
  double best = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::atomic<float> total{0};
    const double t0 = now_seconds();
    parallel_for(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) total.fetch_add(loop(iters));
    });
    const double dt = now_seconds() - t0;
    g_sink = total.load();
    best = std::max(best, threads * iters * flops_per_iter / dt / 1e9);
  }
  kernels::set_num_threads(0);
  return best;
}

}  // namespace

MachineLimits measure_limits(bool quick) {
  MachineLimits l;
  l.threads = kernels::num_threads();
  constexpr int64_t kBytes = int64_t{1} << 30;
  const int64_t n = kBytes / sizeof(float);
  std::unique_ptr<float, decltype(&std::free)> buf(
      static_cast<float*>(std::aligned_alloc(64, kBytes)), &std::free);
  parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) {  // first touch, all threads
    std::fill(buf.get() + b, buf.get() + e, 1.0f);
  });
  const int passes = quick ? 2 : 3;
  l.dram_gbs_1 = read_bandwidth(buf.get(), n, 1, passes);
  l.dram_gbs_all = read_bandwidth(buf.get(), n, l.threads, passes);
  buf.reset();

  const auto& f = kernels::cpu_features();
  const int64_t iters = quick ? 2'000'000 : 5'000'000;
  if (f.has_avx512()) {
    l.fp32_gflops_1 = peak(fma_loop, kChains * 32.0, 1, iters);
    l.fp32_gflops_all = peak(fma_loop, kChains * 32.0, l.threads, iters);
  }
  if (f.has_avx512() && f.avx512bf16) {
    l.bf16_gflops_1 = peak(bf16_loop, kChains * 64.0, 1, iters);
    l.bf16_gflops_all = peak(bf16_loop, kChains * 64.0, l.threads, iters);
  }
  return l;
}

void print_limits(const MachineLimits& l) {
  std::printf("machine limits (measured now)       1 thread   %d threads\n", l.threads);
  std::printf("  DRAM read bandwidth   GB/s     %10.1f %10.1f\n", l.dram_gbs_1, l.dram_gbs_all);
  std::printf("  fp32 AVX-512 FMA      GFLOP/s  %10.1f %10.1f\n", l.fp32_gflops_1,
              l.fp32_gflops_all);
  std::printf("  AVX512_BF16 dot       GFLOP/s  %10.1f %10.1f\n\n", l.bf16_gflops_1,
              l.bf16_gflops_all);
}

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::Memory:
      return "DRAM";
    case Bound::Fp32:
      return "fp32";
    case Bound::Bf16:
      return "bf16";
  }
  return "?";
}

double limit_for(const MachineLimits& l, Bound b) {
  switch (b) {
    case Bound::Memory:
      return l.dram_gbs_all;
    case Bound::Fp32:
      return l.fp32_gflops_all;
    case Bound::Bf16:
      return l.bf16_gflops_all;
  }
  return 0;
}

}  // namespace troupe::bench
