// Measures DRAM read bandwidth and the fp32 / bf16 / int8 arithmetic peaks of the
// instructions this CPU has, with 1 and all threads. The SIMD loops carry their own
// target attributes (bench files are built for the baseline ISA) and run only after a
// run-time feature check.
#include "bench/common/limits.h"

// GCC 12.2's AVX-512 intrinsics seed their pass-through operand from an undefined value,
// which -Wall reports as "__Y is used uninitialized" where they are inlined (GCC PR 105593,
// fixed in 12.3; kernels/cpu/avx512_vec.h silences it for the kernels the same way).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

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

__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float x : lanes) s += x;
  return s;
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
  const bool avx2 = kernels::cpu_features().has_avx2();
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::atomic<float> total{0};
    const double t0 = now_seconds();
    parallel_for(n / 64, 1 << 16, [&](int64_t b, int64_t e) {
      const float* p = buf + b * 64;
      const int64_t len = (e - b) * 64;
      const float s = avx512 ? sum_avx512(p, len) : avx2 ? sum_avx2(p, len) : sum_portable(p, len);
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
// Without AVX-512 there are 16 vector registers: 16 chains and the two constants spilled
// to the stack in the loop, which then measured half the AVX2 FMA peak. 12 still cover
// latency x pipes (4 x 2 on current cores).
constexpr int kChains16Regs = 12;

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

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[kChains16Regs];
  for (int c = 0; c < kChains16Regs; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains16Regs; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  alignas(32) float lanes[8];
  __m256 s = acc[0];
  for (int c = 1; c < kChains16Regs; ++c) s = _mm256_add_ps(s, acc[c]);
  _mm256_store_ps(lanes, s);
  return lanes[0] + lanes[7];
}

// Baseline x86-64: SSE2 mul + add (no FMA), 4 lanes.
float fma_loop_sse2(int64_t iters) {
  __m128 acc[kChains16Regs];
  for (int c = 0; c < kChains16Regs; ++c) acc[c] = _mm_set1_ps(static_cast<float>(c));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains16Regs; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], a), b);
  __m128 s = acc[0];
  for (int c = 1; c < kChains16Regs; ++c) s = _mm_add_ps(s, acc[c]);
  return _mm_cvtss_f32(s);
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

// int8 multiply-adds, u8 x s8 products summed into i32 lanes (what a q8_0 / q4_0
// GEMM runs): vpdpbusd does 64 products per instruction; AVX2 without VNNI needs
// vpmaddubsw (32 products into i16 pairs) + vpmaddwd (into i32) + vpaddd.
__attribute__((target("avx512f,avx512vnni"))) float int8_loop_vnni(int64_t iters) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  __m512i s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  return static_cast<float>(_mm_cvtsi128_si32(_mm512_castsi512_si128(s)));
}

// Each product reads its chain's accumulator as the u8 operand, so no product can be
// hoisted out of the loop. The three instructions of a step take ~9 cycles on a Zen 4 and
// at most one step issues a cycle (vpmaddubsw and vpmaddwd share two pipes), so 10
// chains. Written in asm with one temporary (renamed per step): in C++ GCC scheduled
// every chain's vpmaddubsw first, ran out of registers and kept accumulators on the
// stack, a store and a reload on their chains each step; the probe then read 21 products
// a cycle per thread where this reads 32 (154 -> 234 GOP/s on one thread at 3.67 GHz), as
// an asm loop of these instructions with independent inputs does.
constexpr int kInt8Chains = 10;
__attribute__((target("avx2"))) float int8_loop_avx2(int64_t iters) {
  // Ten named accumulators, not an array: GCC stored an array's every element each step.
  __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),
          a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5),
          a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7), a8 = _mm256_set1_epi32(8),
          a9 = _mm256_set1_epi32(9);
  static_assert(kInt8Chains == 10, "one named accumulator per chain");
  const __m256i b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  // clang-format off
#define TROUPE_INT8_STEP(c)                   \
  "vpmaddubsw %[b], %[a" #c "], %[t]\n\t" \
  "vpmaddwd %[ones], %[t], %[t]\n\t"      \
  "vpaddd %[t], %[a" #c "], %[a" #c "]\n\t"
  // clang-format on
  for (int64_t i = 0; i < iters; ++i) {
    __m256i t;
    asm(TROUPE_INT8_STEP(0) TROUPE_INT8_STEP(1) TROUPE_INT8_STEP(2) TROUPE_INT8_STEP(3)
            TROUPE_INT8_STEP(4) TROUPE_INT8_STEP(5) TROUPE_INT8_STEP(6) TROUPE_INT8_STEP(7)
                TROUPE_INT8_STEP(8) TROUPE_INT8_STEP(9)
        : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), [a5] "+x"(a5),
          [a6] "+x"(a6), [a7] "+x"(a7), [a8] "+x"(a8), [a9] "+x"(a9), [t] "=&x"(t)
        : [b] "x"(b), [ones] "x"(ones));
  }
#undef TROUPE_INT8_STEP
  const __m256i s = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)),
                       _mm256_add_epi32(a8, a9)));
  return static_cast<float>(_mm_cvtsi128_si32(_mm256_castsi256_si128(s)));
}

// AMX-INT8: tdpbusd on tiles of 16 rows x 64 bytes, 16 · 16 · 64 products each, into
// four accumulators (tmm0-3) from two A (tmm4-5) and two B (tmm6-7) tiles, so no
// instruction waits on the one before. The unit's rate does not depend on the values.
constexpr double kAmxOpsPerIter = 4 * 16 * 16 * 64 * 2.0;
__attribute__((target("amx-tile,amx-int8"))) float int8_loop_amx(int64_t iters) {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } cfg;
  _tile_loadconfig(&cfg);  // zeroes every tile
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) int32_t out[16][16];
  _tile_stored(0, out, 64);
  _tile_release();
  return static_cast<float>(out[0][0]);
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
  auto measure = [&](const char* what, float (*loop)(int64_t), double flops_per_iter) {
    return Peak{what, peak(loop, flops_per_iter, 1, iters),
                peak(loop, flops_per_iter, l.threads, iters)};
  };
  if (f.has_avx512()) {
    l.fp32 = measure("fp32 FMA (avx512)", fma_loop, kChains * 32.0);
    l.fp32_avx2 = measure("fp32 FMA (avx2)", fma_loop_avx2, kChains16Regs * 16.0);
  } else if (f.has_avx2()) {
    l.fp32 = measure("fp32 FMA (avx2)", fma_loop_avx2, kChains16Regs * 16.0);
  } else {
    l.fp32 = measure("fp32 mul+add (sse2)", fma_loop_sse2, kChains16Regs * 8.0);
  }
  if (f.has_avx512() && f.avx512bf16)
    l.bf16 = measure("bf16 dot (avx512)", bf16_loop, kChains * 64.0);
  if (f.amx_int8) {  // the widest int8 unit; the VNNI one beside it
    l.int8 = measure("int8 tiles (amx)", int8_loop_amx, kAmxOpsPerIter);
    if (f.has_avx512() && f.avx512vnni) l.int8_vnni = measure("int8 dot (vnni)", int8_loop_vnni, kChains * 128.0);
  } else if (f.has_avx512() && f.avx512vnni) {
    l.int8 = measure("int8 dot (vnni)", int8_loop_vnni, kChains * 128.0);
  } else if (f.has_avx2()) {
    l.int8 = measure("int8 dot (avx2)", int8_loop_avx2, kInt8Chains * 64.0);
  }
  // The AVX2 path's own int8 peak where a wider unit took the slot above (limit_for).
  if (f.has_avx2() && (f.amx_int8 || (f.has_avx512() && f.avx512vnni)))
    l.int8_avx2 = measure("int8 dot (avx2)", int8_loop_avx2, kInt8Chains * 64.0);
  return l;
}

void print_limits(const MachineLimits& l) {
  std::printf("machine limits (measured now)       1 thread   %d threads\n", l.threads);
  std::printf("  %-22s GB/s     %10.1f %10.1f\n", "DRAM read bandwidth", l.dram_gbs_1,
              l.dram_gbs_all);
  for (const Peak* p : {&l.fp32, &l.fp32_avx2, &l.bf16, &l.int8, &l.int8_vnni, &l.int8_avx2})
    if (*p->what)
      std::printf("  %-22s %-8s %10.1f %10.1f\n", p->what,
                  p == &l.int8 || p == &l.int8_vnni || p == &l.int8_avx2 ? "GOP/s" : "GFLOP/s",
                  p->gflops_1, p->gflops_all);
  if (!*l.bf16.what) std::printf("  (no bf16 dot on this CPU: bf16 cases are judged on fp32 FMA)\n");
  std::printf("\n");
}

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::Memory:
      return "DRAM";
    case Bound::Fp32:
      return "fp32";
    case Bound::Bf16:
      return "bf16";
    case Bound::Int8:
      return "int8";
  }
  return "?";
}

double limit_for(const MachineLimits& l, Bound b) {
  switch (b) {
    case Bound::Memory:
      return l.dram_gbs_all;
    case Bound::Fp32:
      return l.fp32.gflops_all;
    case Bound::Bf16:  // Bf16 precision runs f32 FMAs where there is no bf16 dot
      return *l.bf16.what ? l.bf16.gflops_all : l.fp32.gflops_all;
    case Bound::Int8:
      return l.int8.gflops_all;
  }
  return 0;
}

namespace {

// The AVX2 probe standing in for bound b's limit on the AVX2 path, or null where the
// path's limit is the general one (see limits.h).
const Peak* avx2_peak(const MachineLimits& l, Bound b, kernels::CpuPath path) {
  if (path != kernels::CpuPath::Avx2) return nullptr;
  switch (b) {
    case Bound::Fp32:
    case Bound::Bf16:
      return *l.fp32_avx2.what ? &l.fp32_avx2 : nullptr;
    case Bound::Int8:
      return *l.int8_avx2.what ? &l.int8_avx2 : nullptr;
    case Bound::Memory:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

double limit_for(const MachineLimits& l, Bound b, kernels::CpuPath path) {
  const Peak* p = avx2_peak(l, b, path);
  return p != nullptr ? p->gflops_all : limit_for(l, b);
}

std::string bound_tag(const MachineLimits& l, Bound b, kernels::CpuPath path) {
  const Peak* p = avx2_peak(l, b, path);
  return p != nullptr ? std::string(b == Bound::Int8 ? "int8" : "fp32") + " avx2" : bound_name(b);
}

}  // namespace troupe::bench
