// Grouped expert FFN (kernels::moe_experts) on random FP4 / FP8 / F32 expert weights
// against an f64 evaluation of MODEL.md §5.5 written here (weights decoded by hand),
// Cpu against Ref, thread-count independence, skipped slots, and bad parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/moe.h"
#include "kernels/moe_scalar.h"
#include "kernels/parallel.h"

namespace troupe::kernels {
namespace {

// A random stored weight and its values decoded independently of kernels/quant.
struct TestWeight {
  WeightView view;
  std::vector<float> f32;
  std::vector<uint8_t> bytes, scale;
  std::vector<double> value;  // [rows, cols]
};

double e4m3_value(uint8_t c) {
  const int e = (c >> 3) & 0xF, m = c & 7;
  const double v = e > 0 ? std::ldexp(1.0 + m / 8.0, e - 7) : std::ldexp(m / 8.0, -6);
  return c & 0x80 ? -v : v;
}

double e2m1_value(uint8_t c) {
  static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return c & 8 ? -grid[c & 7] : grid[c & 7];
}

double ue8m0_value(uint8_t c) { return std::ldexp(1.0, c - 127); }

TestWeight make_weight(WeightFormat f, int64_t rows, int64_t cols, std::mt19937& rng) {
  TestWeight w;
  w.view = {f, rows, cols, nullptr, nullptr};
  w.value.resize(rows * cols);
  std::uniform_int_distribution<int> byte(0, 255);
  auto scale_code = [&](int lo, int hi) { return static_cast<uint8_t>(lo + byte(rng) % (hi - lo + 1)); };
  if (f == WeightFormat::F32) {
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    w.f32.resize(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) w.value[i] = w.f32[i] = u(rng);
    w.view.data = w.f32.data();
  } else if (f == WeightFormat::FP8) {
    // Exponent field 0..8 keeps |code| <= 3.75 (and away from the NaN codes).
    const int64_t sc = (cols + 31) / 32;
    w.bytes.resize(rows * cols);
    w.scale.resize(((rows + 31) / 32) * sc);
    for (auto& s : w.scale) s = scale_code(124, 127);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int b = byte(rng);
      w.bytes[i] = static_cast<uint8_t>((b & 0x80) | ((b % 9) << 3) | (byte(rng) & 7));
      const int64_t r = i / cols, c = i % cols;
      w.value[i] = e4m3_value(w.bytes[i]) * ue8m0_value(w.scale[(r / 32) * sc + c / 32]);
    }
  } else {  // FP4
    w.bytes.resize(rows * cols / 2);
    w.scale.resize(rows * cols / 32);
    for (auto& s : w.scale) s = scale_code(124, 126);
    for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t r = i / cols, c = i % cols;
      const uint8_t code = (w.bytes[i / 2] >> (4 * (i % 2))) & 0xF;
      w.value[i] = e2m1_value(code) * ue8m0_value(w.scale[r * (cols / 32) + c / 32]);
    }
  }
  if (!w.bytes.empty()) w.view.data = w.bytes.data();
  if (!w.scale.empty()) w.view.scale = w.scale.data();
  return w;
}

struct Case {
  WeightFormat format;
  int64_t m, hidden, inter, experts, top_k;
  float limit;
};

// Everything one moe_experts call reads, generated from a seed.
struct Problem {
  Case c;
  std::vector<TestWeight> w1, w3, w2;
  std::vector<ExpertWeights> experts;
  std::vector<float> x, weight, base;  // base: out before the call
  std::vector<int32_t> pick;
};

Problem make_problem(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{c, {}, {}, {}, {}, {}, {}, {}, {}};
  for (int64_t e = 0; e < c.experts; ++e) {
    p.w1.push_back(make_weight(c.format, c.inter, c.hidden, rng));
    p.w3.push_back(make_weight(c.format, c.inter, c.hidden, rng));
    p.w2.push_back(make_weight(c.format, c.hidden, c.inter, rng));
  }
  for (int64_t e = 0; e < c.experts; ++e) p.experts.push_back({p.w1[e].view, p.w3[e].view, p.w2[e].view});
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), w(0.05f, 1.0f), coin(0.0f, 1.0f);
  for (int64_t i = 0; i < c.m * c.hidden; ++i) p.x.push_back(u(rng));
  for (int64_t i = 0; i < c.m * c.hidden; ++i) p.base.push_back(u(rng));
  std::vector<int32_t> ids(c.experts);
  for (int64_t t = 0; t < c.m; ++t) {
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t k = 0; k < c.top_k; ++k) {
      // ~10% skipped slots; token 2 skips every slot.
      const bool skip = t == 2 || coin(rng) < 0.1f;
      p.pick.push_back(skip ? -1 : ids[k % c.experts]);
      p.weight.push_back(w(rng));
    }
  }
  return p;
}

std::vector<float> run(const Problem& p, Backend b, GemmPrecision precision = GemmPrecision::F32) {
  ScopedBackend sb(b);
  std::vector<float> out = p.base;
  MoeExpertsParams q;
  q.x = p.x.data();
  q.pick = p.pick.data();
  q.weight = p.weight.data();
  q.experts = p.experts.data();
  q.out = out.data();
  q.m = p.c.m;
  q.hidden = p.c.hidden;
  q.inter = p.c.inter;
  q.experts_count = p.c.experts;
  q.top_k = p.c.top_k;
  q.swiglu_limit = p.c.limit;
  q.precision = precision;
  moe_experts(q);
  return out;
}

// out[t] = base[t] + Σ_k weight · w2 · (silu(clamp a) ⊙ clamp b), all in f64.
std::vector<double> reference(const Problem& p) {
  const Case& c = p.c;
  std::vector<double> out(p.base.begin(), p.base.end()), h(c.inter);
  for (int64_t t = 0; t < c.m; ++t) {
    for (int64_t k = 0; k < c.top_k; ++k) {
      const int32_t e = p.pick[t * c.top_k + k];
      if (e < 0) continue;
      for (int64_t i = 0; i < c.inter; ++i) {
        double a = 0, b = 0;
        for (int64_t j = 0; j < c.hidden; ++j) {
          a += p.w1[e].value[i * c.hidden + j] * p.x[t * c.hidden + j];
          b += p.w3[e].value[i * c.hidden + j] * p.x[t * c.hidden + j];
        }
        if (c.limit > 0) {
          a = std::min<double>(a, c.limit);
          b = std::clamp<double>(b, -c.limit, c.limit);
        }
        h[i] = a / (1 + std::exp(-a)) * b;
      }
      for (int64_t j = 0; j < c.hidden; ++j) {
        double y = 0;
        for (int64_t i = 0; i < c.inter; ++i) y += p.w2[e].value[j * c.inter + i] * h[i];
        out[t * c.hidden + j] += p.weight[t * c.top_k + k] * y;
      }
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel,
                  const std::string& what) {
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " at " << i;
  }
}

const Case kCases[] = {
    {WeightFormat::FP4, 0, 64, 96, 8, 6, 0.75f},   {WeightFormat::FP4, 1, 64, 96, 8, 6, 0.75f},
    {WeightFormat::FP4, 3, 64, 96, 32, 6, 0.0f},   {WeightFormat::FP4, 17, 64, 96, 32, 6, 0.75f},
    {WeightFormat::FP4, 64, 64, 96, 8, 6, 10.0f},  {WeightFormat::FP8, 1, 48, 40, 32, 6, 0.75f},
    {WeightFormat::FP8, 3, 48, 40, 8, 6, 0.0f},    {WeightFormat::FP8, 17, 48, 40, 8, 6, 0.75f},
    {WeightFormat::FP8, 64, 48, 40, 32, 6, 0.75f}, {WeightFormat::F32, 17, 33, 17, 8, 6, 0.5f},
    {WeightFormat::F32, 31, 17, 31, 1, 1, 0.0f},   // shared-expert shape: one expert, top_k 1
};

std::string name(const Case& c) {
  return std::string(to_string(c.format)) + " m=" + std::to_string(c.m) +
         " experts=" + std::to_string(c.experts) + " limit=" + std::to_string(c.limit);
}

TEST(MoeExperts, BothBackendsMatchF64Reference) {
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    const Problem p = make_problem(c, seed++);
    const std::vector<double> want = reference(p);
    const std::vector<float> ref = run(p, Backend::Ref), cpu = run(p, Backend::Cpu);
    expect_close(ref, want, 2e-5, "ref " + name(c));
    expect_close(cpu, want, 2e-5, "cpu " + name(c));
    // Token 2 has only skipped slots: its row must be left exactly as it was.
    for (int64_t j = 0; c.m > 2 && j < c.hidden; ++j) {
      ASSERT_EQ(cpu[2 * c.hidden + j], p.base[2 * c.hidden + j]) << name(c);
      ASSERT_EQ(ref[2 * c.hidden + j], p.base[2 * c.hidden + j]) << name(c);
    }
  }
}

// Few active experts (GEMMs threaded inside) and many (threads over experts) must
// give bit-identical results for every thread count.
TEST(MoeExperts, ThreadCountDoesNotChangeResult) {
  ScopedBackend sb(Backend::Cpu);
  for (const Case& c : {kCases[3], kCases[4], kCases[8], kCases[10]}) {
    const Problem p = make_problem(c, 7);
    set_num_threads(1);
    const std::vector<float> one = run(p, Backend::Cpu);
    for (int threads : {2, 3, 8}) {
      set_num_threads(threads);
      const std::vector<float> many = run(p, Backend::Cpu);
      ASSERT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
          << name(c) << " threads=" << threads;
    }
    set_num_threads(0);
  }
}

// Decode steps (a few rows per expert): on more than one thread the CPU backend runs
// every active expert's GEMMs in grouped fork-joins (moe.cpp run_experts_grouped: the
// AVX-512 direct tiles, int8 tiles on every path); each token's result must be the
// one-thread run's bits (experts one at a time) and, with f32 products, the f64
// reference's within the same tolerance.
TEST(MoeExperts, DecodeStepsMatchOneThreadOnEveryPath) {
  const Case cases[] = {
      {WeightFormat::FP4, 1, 64, 96, 8, 6, 0.75f}, {WeightFormat::FP4, 4, 64, 96, 32, 6, 0.75f},
      {WeightFormat::FP8, 2, 48, 40, 8, 6, 0.0f},  {WeightFormat::FP4, 16, 64, 96, 8, 6, 10.0f},
  };
  uint32_t seed = 40;
  for (CpuPath path : {CpuPath::Portable, CpuPath::Avx2, CpuPath::Avx512}) {
    if (!cpu_supports(path)) {
      std::printf("[ SKIPPED  ] %s: %s\n", to_string(path), missing_reason(path));
      continue;
    }
    ScopedCpuPath sp(path);
    for (const Case& c : cases)
      for (GemmPrecision precision : {GemmPrecision::F32, GemmPrecision::Int8}) {
        const Problem p = make_problem(c, seed++);
        SCOPED_TRACE(std::string(to_string(path)) + " " + name(c) +
                     (precision == GemmPrecision::Int8 ? " int8" : " f32"));
        set_num_threads(1);
        const std::vector<float> one = run(p, Backend::Cpu, precision);
        for (int threads : {2, 3}) {
          set_num_threads(threads);
          const std::vector<float> many = run(p, Backend::Cpu, precision);
          ASSERT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
              << "threads=" << threads;
        }
        set_num_threads(0);
        if (precision == GemmPrecision::F32) expect_close(one, reference(p), 2e-5, "f64");
      }
  }
}

// The CPU paths' SwiGLU (kernels/cpu/swiglu.h) against its definition in double: within
// 4 ulp of the result (e^x rounded once, then a divide and a multiply; 2 subnormal
// steps), the clamp's NaN choices and the overflow ends as the scalar form has them, a
// value's bits the same wherever it sits in the range (threads split ranges anywhere),
// and nearly every value the scalar form's (std::exp) bit for bit.
TEST(MoeExperts, SwiGluPathsStayWithinUlpsOfTheDefinition) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f);
  const int64_t n = 1000 + 13;
  std::vector<float> a0(n), b0(n);
  for (int64_t i = 0; i < n; ++i) a0[i] = wide(rng), b0[i] = wide(rng) / 4;
  const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 95.0f, -95.0f, 200.0f, -200.0f,
                           INFINITY, -INFINITY, NAN};
  for (int64_t i = 0; i < int64_t(std::size(special)); ++i) a0[i] = special[i], b0[n - 1 - i] = special[i];
  for (CpuPath path : {CpuPath::Portable, CpuPath::Avx2, CpuPath::Avx512}) {
    if (!cpu_supports(path)) {
      std::printf("[ SKIPPED  ] %s: %s\n", to_string(path), missing_reason(path));
      continue;
    }
    ScopedCpuPath sp(path);
    for (float limit : {0.0f, 7.0f}) {
      SCOPED_TRACE(std::string(to_string(path)) + " limit=" + std::to_string(limit));
      std::vector<float> a = a0;
      cpu::swiglu(a.data(), b0.data(), n, limit);
      int64_t same = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float scalar = moe_detail::swiglu(a0[i], b0[i], limit);
        same += std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(scalar);
        if (std::isnan(scalar)) {
          ASSERT_TRUE(std::isnan(a[i])) << "i=" << i << " a=" << a0[i] << " b=" << b0[i];
          continue;
        }
        if (std::isinf(scalar) || scalar == 0.0f) {
          ASSERT_EQ(a[i], scalar) << "i=" << i << " a=" << a0[i] << " b=" << b0[i];
          continue;
        }
        double x = a0[i], y = b0[i];
        if (limit > 0) x = std::fmin(x, limit), y = std::fmin(std::fmax(y, -limit), limit);  // fmin: NaN -> the limit
        const double want = x / (1 + std::exp(-x)) * y;
        ASSERT_NEAR(a[i], want, 4 * std::fabs(want) * 0x1p-23 + 0x1p-148) << "i=" << i << " a=" << a0[i] << " b=" << b0[i];
      }
      EXPECT_GE(same, n - n / 200) << "values equal to the scalar form's bits";
      // The same values from an offset start: each value's bits unchanged.
      std::vector<float> shifted = a0;
      cpu::swiglu(shifted.data() + 3, b0.data() + 3, n - 3, limit);
      for (int64_t i = 3; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(shifted[i]), std::bit_cast<uint32_t>(a[i])) << "i=" << i;
    }
  }
}

TEST(MoeExperts, Bf16PrecisionStaysClose) {
  const Problem p = make_problem(kCases[3], 11);
  expect_close(run(p, Backend::Cpu, GemmPrecision::Bf16), reference(p), 2e-2, "bf16");
}

TEST(MoeExperts, RejectsBadParams) {
  Problem p = make_problem({WeightFormat::F32, 2, 32, 32, 4, 2, 0.0f}, 3);
  p.pick = {0, 1, 2, 3};
  EXPECT_NO_THROW(run(p, Backend::Ref));
  p.pick[1] = 4;  // == experts_count
  EXPECT_THROW(run(p, Backend::Cpu), Error);
  p.pick[1] = -2;
  EXPECT_THROW(run(p, Backend::Cpu), Error);
  p.pick[1] = 1;
  p.experts[3].w2.rows = 31;  // wrong shape on a picked expert
  EXPECT_THROW(run(p, Backend::Cpu), Error);
  p.pick[3] = -1;  // ... but an unpicked expert may be anything
  p.experts[3] = ExpertWeights{};
  EXPECT_NO_THROW(run(p, Backend::Cpu));
  p.c.limit = -1.0f;
  EXPECT_THROW(run(p, Backend::Cpu), Error);
}

}  // namespace
}  // namespace troupe::kernels
