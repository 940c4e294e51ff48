// cpu::gemm_grouped (kernels/gemm.h): independent GEMMs, each with its own x, m, weight
// and y, in one call must give every y exactly what cpu::gemm gives it alone, on every
// CPU path this machine has and for 1-3 threads: GEMMs the one fork-join takes (AVX-512
// and AVX2 direct decode rows of each format family, FP8 at M = 1 with x's fold ranges,
// FP4 and Q4_0 on int8 tiles), GEMMs it runs
// one by one (M past the direct tiles), runs of consecutive GEMMs over one x (an
// expert's w1 / w3) beside GEMMs over other x, accumulation, output strides, a GEMM of
// no rows; nothing outside each y is written.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace troupe::kernels {
namespace {

constexpr float kSentinel = -12345.0f;

// A random stored weight [n, k]; codes avoid the FP8 NaN codes.
struct Weight {
  std::vector<uint8_t> bytes, scale;
  WeightView view;
};
Weight random_weight(WeightFormat f, int64_t n, int64_t k, std::mt19937& rng) {
  Weight w;
  std::uniform_int_distribution<int> byte(0, 255);
  int64_t bytes = n * k * 2, scales = 0;  // F16
  if (f == WeightFormat::FP4) bytes = n * k / 2, scales = n * k / 32;
  if (f == WeightFormat::FP8) bytes = n * k, scales = (n + 31) / 32 * ((k + 31) / 32);
  if (f == WeightFormat::Q4_0) bytes = n * k / 32 * 18;
  w.bytes.resize(bytes);
  for (size_t i = 0; i < w.bytes.size(); ++i) {
    uint8_t b = static_cast<uint8_t>(byte(rng));
    if (f == WeightFormat::FP8) b = static_cast<uint8_t>((b & 0x80) | ((b % 9) << 3) | (byte(rng) & 7));
    if (f == WeightFormat::F16 && i % 2 == 1) b = static_cast<uint8_t>((b & 0x80) | (0x30 + b % 12));
    if (f == WeightFormat::Q4_0 && i % 18 == 1) b = 0x2C;  // the block's f16 scale: 2^-4 and up
    w.bytes[i] = b;
  }
  w.scale.resize(scales);
  for (uint8_t& s : w.scale) s = static_cast<uint8_t>(122 + byte(rng) % 6);
  w.view = {f, n, k, w.bytes.data(), w.scale.empty() ? nullptr : w.scale.data()};
  return w;
}

// One GEMM of a call: its weight, rows, which x it reads (calls with the same x index
// share one x buffer), and how its y is laid out.
struct Item {
  WeightFormat format;
  int64_t n, m;
  int x;
  bool accumulate;
  int64_t y_pad;
  GemmPrecision precision;
};

struct Call {
  const char* name;
  int64_t k;
  std::vector<Item> items;
};

const GemmPrecision kF32 = GemmPrecision::F32, kInt8 = GemmPrecision::Int8;

const Call kCalls[] = {
    // A decode step's experts: w1 / w3 pairs over one x each, M = 1-4, an empty expert.
    {"experts",
     96,
     {{WeightFormat::FP4, 40, 1, 0, false, 0, kF32},
      {WeightFormat::FP4, 40, 1, 0, false, 0, kF32},
      {WeightFormat::FP4, 37, 2, 1, false, 3, kF32},
      {WeightFormat::FP4, 37, 2, 1, true, 0, kF32},
      {WeightFormat::FP4, 40, 0, 2, false, 0, kF32},
      {WeightFormat::FP4, 9, 4, 3, false, 0, kF32}}},
    // Formats and column orders mixed, M in passes of the direct tiles (FP4 6 and 16
    // rows), and past them (17 rows; Bf16 precision at 5) one by one.
    {"mixed",
     160,
     {{WeightFormat::F16, 21, 3, 0, false, 1, kF32},
      {WeightFormat::FP8, 70, 3, 0, true, 0, kF32},
      {WeightFormat::FP8, 33, 1, 1, false, 0, kF32},
      {WeightFormat::FP4, 12, 6, 2, false, 2, kF32},
      {WeightFormat::FP4, 13, 16, 3, true, 0, kF32},
      {WeightFormat::FP4, 11, 17, 1, false, 0, kF32},
      {WeightFormat::FP4, 9, 5, 0, false, 0, GemmPrecision::Bf16},
      {WeightFormat::F16, 50, 2, 3, false, 0, GemmPrecision::Bf16}}},
    // Int8 tiles: FP4 under Int8 and Q4_0, beside an f32 FP4 over the same x.
    {"int8",
     128,
     {{WeightFormat::FP4, 36, 2, 0, false, 0, kInt8},
      {WeightFormat::FP4, 36, 2, 0, true, 1, kInt8},
      {WeightFormat::FP4, 29, 1, 1, false, 0, kInt8},
      {WeightFormat::Q4_0, 44, 3, 2, false, 0, kF32},
      {WeightFormat::FP4, 20, 2, 0, false, 0, kF32},
      {WeightFormat::FP4, 20, 17, 3, false, 0, kInt8}}},
};

// The GEMM an item describes, over x (row stride ldx) and w, into y.
GemmParams params_of(const Item& it, const float* x, int64_t ldx, const WeightView& w, float* y) {
  GemmParams p;
  p.x = x;
  p.w = w;
  p.m = it.m;
  p.ldx = ldx;
  p.ldy = it.n + it.y_pad;
  p.accumulate = it.accumulate;
  p.precision = it.precision;
  p.y = y;
  return p;
}

TEST(GemmGrouped, EachYIsItsOwnGemmsBitForBit) {
  uint32_t seed = 900;
  for (CpuPath path : {CpuPath::Portable, CpuPath::Avx2, CpuPath::Avx512}) {
    if (!cpu_supports(path)) {
      std::printf("[ SKIPPED  ] %s: %s\n", to_string(path), missing_reason(path));
      continue;
    }
    ScopedBackend backend(Backend::Cpu);
    ScopedCpuPath scoped(path);
    for (const Call& call : kCalls)
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(std::string(to_string(path)) + " " + call.name + ", threads " + std::to_string(threads));
        std::mt19937 rng(seed++);
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        const int64_t ldx = call.k + 5;
        std::vector<std::vector<float>> xs(4, std::vector<float>(17 * ldx));
        for (auto& x : xs)
          for (float& v : x) v = uni(rng);
        std::vector<Weight> ws;
        std::vector<std::vector<float>> want, got;
        std::vector<GemmParams> ps;
        for (const Item& it : call.items) {
          ws.push_back(random_weight(it.format, it.n, call.k, rng));
          const int64_t ldy = it.n + it.y_pad;
          std::vector<float> y0((it.m + 1) * ldy, kSentinel);
          for (int64_t r = 0; r < it.m; ++r)
            for (int64_t j = 0; j < it.n; ++j) y0[r * ldy + j] = it.accumulate ? uni(rng) : NAN;
          want.push_back(y0);
          got.push_back(y0);
        }
        set_num_threads(threads);
        for (size_t i = 0; i < call.items.size(); ++i) {
          const Item& it = call.items[i];
          GemmParams p = params_of(it, xs[it.x].data(), ldx, ws[i].view, want[i].data());
          cpu::gemm(p);
          p.y = got[i].data();
          ps.push_back(p);
        }
        cpu::gemm_grouped(ps);
        set_num_threads(0);
        for (size_t i = 0; i < ps.size(); ++i)
          for (size_t j = 0; j < want[i].size(); ++j)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(want[i][j]))
                << "gemm " << i << " y[" << j << "] = " << got[i][j] << ", alone " << want[i][j];
      }
  }
}

// The validated entry kernels::gemm_grouped on the Ref and CPU backends: each y as
// kernels::gemm gives it there, and a bad GEMM anywhere in the list is refused.
TEST(GemmGrouped, TheEntryGivesEachGemmsBitsOnEveryBackend) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const Call& call = kCalls[1];  // "mixed"
  const int64_t ldx = call.k + 5;
  std::vector<std::vector<float>> xs(4, std::vector<float>(17 * ldx));
  for (auto& x : xs)
    for (float& v : x) v = uni(rng);
  std::vector<Weight> ws;
  for (const Item& it : call.items) ws.push_back(random_weight(it.format, it.n, call.k, rng));
  for (Backend b : {Backend::Ref, Backend::Cpu}) {
    ScopedBackend backend(b);
    std::vector<std::vector<float>> want, got;
    std::vector<GemmParams> ps;
    for (size_t i = 0; i < call.items.size(); ++i) {
      const Item& it = call.items[i];
      want.emplace_back((it.m + 1) * (it.n + it.y_pad), 0.5f);
      got.push_back(want.back());
      GemmParams p = params_of(it, xs[it.x].data(), ldx, ws[i].view, want[i].data());
      gemm(p);
      p.y = got[i].data();
      ps.push_back(p);
    }
    gemm_grouped(ps);
    for (size_t i = 0; i < ps.size(); ++i)
      for (size_t j = 0; j < want[i].size(); ++j)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(want[i][j]))
            << to_string(b) << " gemm " << i << " y[" << j << "]";
    ps[2].ldx = 1;  // below K
    EXPECT_THROW(gemm_grouped(ps), Error) << to_string(b);
  }
}

// Which GEMMs the one fork-join takes: int8 tiles on every path; f32 decode rows on the
// AVX-512 direct tiles only (the AVX2 and portable paths run those one by one): up to 4
// rows, and with f32 products up to 16 in passes of 4; Bf16 precision past 4 rows not.
TEST(GemmGrouped, JoinsTheGroupAsDocumented) {
  ScopedBackend backend(Backend::Cpu);
  GemmParams p;
  p.w = {WeightFormat::FP4, 64, 64, nullptr, nullptr};
  for (CpuPath path : {CpuPath::Portable, CpuPath::Avx2, CpuPath::Avx512}) {
    if (!cpu_supports(path)) continue;
    ScopedCpuPath scoped(path);
    const bool avx512 = path == CpuPath::Avx512, avx2 = path == CpuPath::Avx2;
    for (int64_t m : {1, 4, 5, 16, 17}) {
      SCOPED_TRACE(std::string(to_string(path)) + ", m " + std::to_string(m));
      p.m = m;
      p.precision = GemmPrecision::Int8;
      EXPECT_TRUE(cpu::gemm_joins_group(p));
      // AVX-512: the direct tiles, in passes to 16 rows with f32 products; AVX2: its
      // direct tiles (4 rows) in either precision.
      p.precision = GemmPrecision::F32;
      EXPECT_EQ(cpu::gemm_joins_group(p), (avx512 && m <= 16) || (avx2 && m <= 4));
      p.precision = GemmPrecision::Bf16;
      EXPECT_EQ(cpu::gemm_joins_group(p), (avx512 || avx2) && m <= 4);
    }
  }
}

}  // namespace
}  // namespace troupe::kernels
