// GEMM tests: hand-worked values, exact single-element decode of every code, then a
// grid of shapes x formats comparing every CPU path (portable, AVX2+FMA, AVX-512 with
// and without vdpbf16ps) with ref::gemm. Each test is instantiated once per path; a
// path this CPU lacks is skipped with the reason (never run as another path's twin). Outputs are
// poisoned (NaN) before each call and guarded by sentinel columns/rows that must stay untouched; x
// row padding is NaN so a read past K shows up as NaN in y.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/dispatch.h"
#include "kernels/ggml_blocks.h"
#include "kernels/parallel.h"
#include "kernels/quant.h"
#include "model/gguf_dequant.h"

namespace troupe::kernels {
namespace {

constexpr float kSentinel = -12345.5f;

// A stored weight with random codes (MODEL.md §2 layouts). Scale codes 110..135 keep
// values within f32 normals; E4M3 NaN codes are avoided except where a test wants them.
// F16 mixes in the awkward halves (signed zeros, subnormals, the smallest normal, and
// rarely ±65504, whose size would otherwise dominate every tolerance).
struct TestWeight {
  WeightFormat format;
  int64_t rows, cols;
  std::vector<uint8_t> data, scale;

  WeightView view() const {
    return {format, rows, cols, data.empty() ? nullptr : data.data(),
            scale.empty() ? nullptr : scale.data()};
  }
  std::vector<float> dequantized() const {
    std::vector<float> w(static_cast<size_t>(rows * cols));
    dequantize_rows(view(), 0, rows, w.data());
    return w;
  }
};

int64_t scale_count(WeightFormat f, int64_t rows, int64_t cols) {
  switch (f) {
    case WeightFormat::FP8:
      return ((rows + 31) / 32) * ((cols + 31) / 32);
    case WeightFormat::FP4:
    case WeightFormat::ROWFP8:
      return rows * (cols / 32);
    default:
      return 0;
  }
}

TestWeight random_weight(WeightFormat f, int64_t rows, int64_t cols, std::mt19937& rng) {
  TestWeight w{f, rows, cols, {}, {}};
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), sc(110, 135);
  const int64_t n = rows * cols;
  switch (f) {
    case WeightFormat::F32:
      w.data.resize(n * 4);
      for (int64_t i = 0; i < n; ++i) {
        const float v = uni(rng);
        std::memcpy(&w.data[i * 4], &v, 4);
      }
      break;
    case WeightFormat::BF16:
      w.data.resize(n * 2);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = bf16_encode(uni(rng));
        std::memcpy(&w.data[i * 2], &v, 2);
      }
      break;
    case WeightFormat::F16: {
      constexpr uint16_t kSmall[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8200};
      w.data.resize(n * 2);
      for (int64_t i = 0; i < n; ++i) {
        const int pick = byte(rng);
        uint16_t v = f16_encode(uni(rng));
        if (pick < 16) v = kSmall[pick % 8];
        if (pick == 255) v = byte(rng) % 2 ? 0x7BFF : 0xFBFF;
        std::memcpy(&w.data[i * 2], &v, 2);
      }
      break;
    }
    case WeightFormat::FP4:
      w.data.resize(n / 2);
      for (auto& b : w.data) b = static_cast<uint8_t>(byte(rng));
      break;
    case WeightFormat::FP8:
    case WeightFormat::ROWFP8:
      w.data.resize(n);
      for (auto& b : w.data) {
        do b = static_cast<uint8_t>(byte(rng));
        while ((b & 0x7F) == 0x7F);
      }
      break;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:  // GGUF blocks: tests/kernels/gemm_q8_test.cpp writes its own
      ADD_FAILURE() << "random_weight: no " << to_string(f) << " weights here";
      break;
  }
  w.scale.resize(scale_count(f, rows, cols));
  for (auto& s : w.scale) s = static_cast<uint8_t>(sc(rng));
  return w;
}

// The CPU paths under test; each computes y like kernels::gemm on Backend::Cpu.
struct Path {
  const char* name;  // also the gtest parameter name
  CpuPath isa;
  bool needs_bf16_dot;
  void (*run)(const GemmParams&);
};

const Path kPaths[] = {
    {"portable", CpuPath::Portable, false, [](const GemmParams& p) { cpu::gemm_portable(p); }},
    {"avx2", CpuPath::Avx2, false, [](const GemmParams& p) { cpu::gemm_avx2(p); }},
    {"avx512_f32fma", CpuPath::Avx512, false,
     [](const GemmParams& p) { cpu::gemm_avx512(p, false); }},
    {"avx512_bf16dot", CpuPath::Avx512, true,
     [](const GemmParams& p) { cpu::gemm_avx512(p, true); }},
};

// One test per path: the fixture skips a path the CPU lacks, saying why.
class GemmPath : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!cpu_supports(path().isa))
      GTEST_SKIP() << path().name << ": " << missing_reason(path().isa);
    if (path().needs_bf16_dot && !cpu_features().avx512bf16)
      GTEST_SKIP() << path().name << ": this CPU lacks AVX512_BF16";
  }
  static const Path& path() { return kPaths[GetParam()]; }
};

std::string path_name(const ::testing::TestParamInfo<int>& info) {
  return kPaths[info.param].name;
}

// The AVX2 kernels decode F16 with F16C, which AVX2+FMA does not imply (cpu::gemm sends
// F16 to the portable path on such a CPU).
bool runs_f16(const Path& p) {
  return p.isa != CpuPath::Avx2 || cpu_features().f16c;
}
constexpr const char* kNoF16c = "this CPU lacks F16C (F16 weights run on the portable path)";

// The formats whose weights are f32 values the paths multiply in f32.
std::vector<WeightFormat> formats_for(const Path& p) {
  std::vector<WeightFormat> f{WeightFormat::F32, WeightFormat::BF16, WeightFormat::FP8,
                              WeightFormat::FP4, WeightFormat::ROWFP8};
  if (runs_f16(p)) f.insert(f.begin() + 2, WeightFormat::F16);
  return f;
}

struct Case {
  WeightFormat format;
  int64_t m, n, k;
  int64_t x_pad = 0, y_pad = 0;  // ldx = k + x_pad, ldy = n + y_pad
  bool accumulate = false;
  GemmPrecision precision = GemmPrecision::F32;

  std::string str() const {
    return std::string(to_string(format)) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
           " k=" + std::to_string(k) + " ldx+" + std::to_string(x_pad) + " ldy+" +
           std::to_string(y_pad) + (accumulate ? " acc" : "") +
           (precision == GemmPrecision::Bf16 ? " bf16" : " f32");
  }
};

// Inputs of one case plus the poisoned output buffer every path starts from.
struct Problem {
  Case c;
  TestWeight w;
  std::vector<float> x;   // [m, ldx], NaN past k
  std::vector<float> y0;  // [m + 1, ldy]: NaN (or random when accumulating), sentinels outside
  int64_t ldx() const { return c.k + c.x_pad; }
  int64_t ldy() const { return c.n + c.y_pad; }

  GemmParams params(float* y) const {
    GemmParams p;
    p.x = x.empty() ? nullptr : x.data();
    p.w = w.view();
    p.y = y;
    p.m = c.m;
    p.ldx = c.x_pad ? ldx() : 0;  // 0 exercises the "means K / N" default
    p.ldy = c.y_pad ? ldy() : 0;
    p.accumulate = c.accumulate;
    p.precision = c.precision;
    return p;
  }
};

Problem make_problem(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem pr{c, random_weight(c.format, c.n, c.k, rng), {}, {}};
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  pr.x.assign(static_cast<size_t>(c.m * pr.ldx()), NAN);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t k = 0; k < c.k; ++k) pr.x[m * pr.ldx() + k] = uni(rng);
  pr.y0.assign(static_cast<size_t>((c.m + 1) * pr.ldy()), kSentinel);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < c.n; ++n) pr.y0[m * pr.ldy() + n] = c.accumulate ? uni(rng) : NAN;
  return pr;
}

// Σ_k |x_k·w_k| (+ |y0| when accumulating) per output element, the scale of the
// rounding error of any summation order.
std::vector<double> magnitudes(const Problem& pr) {
  const std::vector<float> w = pr.w.dequantized();
  std::vector<double> mag(static_cast<size_t>(pr.c.m * pr.c.n));
  for (int64_t m = 0; m < pr.c.m; ++m)
    for (int64_t n = 0; n < pr.c.n; ++n) {
      double s = pr.c.accumulate ? std::fabs(pr.y0[m * pr.ldy() + n]) : 0.0;
      for (int64_t k = 0; k < pr.c.k; ++k)
        s += std::fabs(double{pr.x[m * pr.ldx() + k]} * w[n * pr.c.k + k]);
      mag[m * pr.c.n + n] = s;
    }
  return mag;
}

// |y - y_ref| <= tol·magnitude per element; guard cells bit-identical to the sentinel.
void expect_close(const Problem& pr, const std::vector<double>& mag, const std::vector<float>& y,
                  const std::vector<float>& ref, double tol, const std::string& what) {
  int failures = 0;
  for (int64_t m = 0; m <= pr.c.m; ++m)
    for (int64_t n = 0; n < pr.ldy(); ++n) {
      const size_t i = static_cast<size_t>(m * pr.ldy() + n);
      if (m == pr.c.m || n >= pr.c.n) {  // guard: never written
        if (std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(kSentinel) && failures++ < 5)
          ADD_FAILURE() << what << ": guard y[" << m << "][" << n << "] overwritten with " << y[i];
        continue;
      }
      if (std::isnan(ref[i]) && std::isnan(y[i])) continue;  // a NaN weight code's row
      const double bound = tol * mag[m * pr.c.n + n] + 1e-30;
      const double err = std::fabs(double{y[i]} - ref[i]);
      if (!(err <= bound) && failures++ < 5)
        ADD_FAILURE() << what << ": y[" << m << "][" << n << "] = " << y[i] << ", ref " << ref[i]
                      << ", err " << err << " > " << bound;
    }
}

std::vector<float> run_ref(const Problem& pr) {
  std::vector<float> y = pr.y0;
  ScopedBackend b(Backend::Ref);
  gemm(pr.params(y.data()));
  return y;
}

// Reordered f32 sums: each is within ~K·2^-24·Σ|x·w| of exact, in practice ~√K·2^-24.
constexpr double kF32Tol = 1e-5;

void check_case(const Path& path, const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.str());
  const Problem pr = make_problem(c, seed);
  const std::vector<float> ref = run_ref(pr);
  const std::vector<double> mag = magnitudes(pr);
  std::vector<float> y = pr.y0;
  path.run(pr.params(y.data()));
  expect_close(pr, mag, y, ref, kF32Tol, path.name);
}

// --- hand-worked and exact values -------------------------------------------------------

TEST_P(GemmPath, HandWorkedSmall) {
  const Path& path = this->path();
  // y = x·Wᵀ with x = [[1, 2], [3, 4]] and W = [[1, 0], [0, 1], [1, 1]] (3 outputs).
  const std::vector<float> x{1, 2, 3, 4};
  const std::vector<float> wf{1, 0, 0, 1, 1, 1};
  std::vector<uint16_t> wb, wh;
  for (float v : wf) wb.push_back(bf16_encode(v));
  for (float v : wf) wh.push_back(v == 1 ? 0x3C00 : 0x0000);  // IEEE half 1.0 and 0.0
  std::vector<WeightView> views{WeightView{WeightFormat::F32, 3, 2, wf.data(), nullptr},
                                WeightView{WeightFormat::BF16, 3, 2, wb.data(), nullptr}};
  if (runs_f16(path)) views.push_back(WeightView{WeightFormat::F16, 3, 2, wh.data(), nullptr});
  for (const WeightView& w : views) {
    {
      std::vector<float> y(6, NAN);
      GemmParams p;
      p.x = x.data();
      p.w = w;
      p.y = y.data();
      p.m = 2;
      path.run(p);
      EXPECT_EQ(y, (std::vector<float>{1, 2, 3, 3, 4, 7})) << path.name << " " << to_string(w.format);
      p.accumulate = true;
      path.run(p);
      EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 6, 8, 14})) << path.name << " accumulate";
    }
  }
}

// Row r holds code r in column 0 (zeros elsewhere) and every x row is e_0, so y[.][r] is
// exactly the dequantized code: every E4M3 code incl. subnormals and NaN, at extreme
// scales, through the direct (M = 1), blocked decode (M = 5) and prefill (M = 20)
// loops, and through the bf16 kernels (where the values are normal bf16 values).
TEST_P(GemmPath, Fp8DecodesEveryCodeExactly) {
  const Path& path = this->path();
  for (uint8_t scale_code : {uint8_t{127}, uint8_t{1}, uint8_t{134}, uint8_t{200}}) {
    for (WeightFormat f : {WeightFormat::FP8, WeightFormat::ROWFP8}) {
      TestWeight w{f, 256, 32, std::vector<uint8_t>(256 * 32, 0),
                   std::vector<uint8_t>(scale_count(f, 256, 32), scale_code)};
      for (int r = 0; r < 256; ++r) w.data[r * 32] = static_cast<uint8_t>(r);
      for (int64_t m : {1, 5, 20})
        for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16}) {
          if (prec == GemmPrecision::Bf16 && scale_code == 1) continue;  // f32 subnormals
          std::vector<float> x(32 * m, 0.0f);
          for (int64_t i = 0; i < m; ++i) x[i * 32] = 1.0f;
          {
            std::vector<float> y(256 * m, kSentinel);
            GemmParams p;
            p.x = x.data();
            p.w = w.view();
            p.y = y.data();
            p.m = m;
            p.precision = prec;
            path.run(p);
            for (int64_t i = 0; i < m; ++i)
              for (int r = 0; r < 256; ++r) {
                const float want = e4m3_decode(static_cast<uint8_t>(r)) * ue8m0_decode(scale_code);
                const float got = y[i * 256 + r];
                if (std::isnan(want)) {
                  EXPECT_TRUE(std::isnan(got)) << path.name << " m=" << m << " code " << r;
                } else {
                  EXPECT_EQ(got, want) << path.name << " " << to_string(f) << " m=" << m << " code "
                                       << r << " scale " << int{scale_code};
                }
              }
          }
        }
    }
  }
  EXPECT_EQ(e4m3_decode(0x7E), 448.0f);  // the reference above is MODEL.md §3's grid
  EXPECT_EQ(e4m3_decode(0x01), 0x1p-9f);
}

// Every E2M1 code in every column of a 32-column block (row r: code r % 16 in column
// (r / 16) % 32, +0 codes elsewhere; x rows all ones), at scales from the f32 subnormal
// 2^-127 to 2^127 (6 · 2^127 overflows to inf) and the NaN code 255, through the direct
// (M = 1), blocked decode (M = 5) and prefill (M = 20) loops in both precisions: y[.][r]
// is exactly the code's value times the scale, computed here by ldexp on MODEL.md §3's grid.
TEST_P(GemmPath, Fp4DecodesEveryCodeExactly) {
  const Path& path = this->path();
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};  // MODEL.md §3 E2M1
  const uint8_t scales[] = {0, 1, 2, 100, 126, 127, 128, 200, 253, 254, 255};
  constexpr int64_t kRows = 16 * 32 * 2;  // each (code, column) twice, at two scales
  TestWeight w{WeightFormat::FP4, kRows, 32, std::vector<uint8_t>(kRows * 16, 0),
               std::vector<uint8_t>(kRows, 0)};
  for (int64_t r = 0; r < kRows; ++r) {
    const int code = static_cast<int>(r % 16), col = static_cast<int>(r / 16 % 32);
    w.data[r * 16 + col / 2] = static_cast<uint8_t>(code << (4 * (col % 2)));
    w.scale[r] = scales[(r / 16 + r / 512) % std::size(scales)];
  }
  for (int64_t m : {1, 5, 20})
    for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16}) {
      std::vector<float> x(32 * m, 1.0f), y(kRows * m, kSentinel);
      GemmParams p;
      p.x = x.data();
      p.w = w.view();
      p.y = y.data();
      p.m = m;
      p.precision = prec;
      path.run(p);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < kRows; ++r) {
          const int code = static_cast<int>(r % 16), scale = w.scale[r];
          // bf16 dot products may flush f32 subnormals: those scales are f32-only.
          if (prec == GemmPrecision::Bf16 && scale < 2) continue;
          const float want = (code & 8 ? -1.0f : 1.0f) * std::ldexp(grid[code & 7], scale - 127);
          const float got = y[i * kRows + r];
          if (scale == 255) {
            EXPECT_TRUE(std::isnan(got)) << path.name << " m=" << m << " row " << r;
          } else {
            EXPECT_EQ(got, want) << path.name << " m=" << m << (prec == GemmPrecision::Bf16 ? " bf16" : " f32") << " row " << r
                                 << " code " << code << " scale " << scale;
          }
        }
    }
}

// Every IEEE half code, one per weight row, in column r % 48 (so every lane of a block
// and the ragged tail of K = 48 decode it); x rows are all ones and every other weight
// is +0, so y[.][r] is exactly the code's value: subnormals, ±65504, ±inf (NaN codes
// give NaN), against model/gguf_dequant's independent decoder, through the direct
// (M = 1, 3), blocked decode (M = 5) and prefill (M = 20) loops, in both precisions
// (x = 1 is a bf16 value). (A sum starting from +0 turns -0 into +0, as ref does; the
// sign of zero is checked on dequantize_rows in weight_format_test.cpp.)
TEST_P(GemmPath, F16DecodesEveryCodeExactly) {
  const Path& path = this->path();
  if (!runs_f16(path)) GTEST_SKIP() << path.name << ": " << kNoF16c;
  constexpr int64_t kRows = 65536, kCols = 48;
  std::vector<uint16_t> w(kRows * kCols, 0);
  for (int64_t r = 0; r < kRows; ++r) w[r * kCols + r % kCols] = static_cast<uint16_t>(r);
  for (int64_t m : {1, 3, 5, 20})
    for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16}) {
      const std::vector<float> x(kCols * m, 1.0f);
      std::vector<float> y(kRows * m, kSentinel);
      GemmParams p;
      p.x = x.data();
      p.w = {WeightFormat::F16, kRows, kCols, w.data(), nullptr};
      p.y = y.data();
      p.m = m;
      p.precision = prec;
      path.run(p);
      int failures = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < kRows; ++r) {
          const float want = model::f16_to_f32(static_cast<uint16_t>(r)), got = y[i * kRows + r];
          const bool ok = std::isnan(want) ? std::isnan(got) : got == want;
          if (!ok && failures++ < 5)
            ADD_FAILURE() << path.name << " m=" << m << " code 0x" << std::hex << r << std::dec
                          << ": " << got << ", want " << want;
        }
    }
}

// F16 -> f32 is exact and every path decodes F16 into F32's column order, so an F16
// weight gives, bit for bit, what the same path gives for its widened f32 copy: the
// direct, blocked decode and prefill loops (M = 1, 3, 16, 64, 512), K and N off the
// tile sizes (and K across several buffered blocks), both precisions, accumulating or
// not. (On AVX-512 Bf16 keeps F16 weights, like F32 ones, off vdpbf16ps: they are not
// bf16 values.) ref::gemm sums in another order (k ascending, one accumulator), so
// against it the result is within kF32Tol, as for every format.
TEST_P(GemmPath, F16EqualsItsWidenedF32BitForBit) {
  if (!runs_f16(path())) GTEST_SKIP() << path().name << ": " << kNoF16c;
  uint32_t seed = 3000;
  for (int64_t m : {1, 3, 16, 64, 512})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{37, 100}, {70, 2080}, {5, 17}}) {
      if (m == 512 && k > 1000) continue;  // the prefill loop is covered by k = 100, 17
      Case c{WeightFormat::F16, m, n, k, seed % 3 == 0 ? 5 : 0, seed % 2 ? 3 : 0, seed % 4 == 1,
             seed % 5 >= 3 ? GemmPrecision::Bf16 : GemmPrecision::F32};
      SCOPED_TRACE(c.str());
      const Problem half = make_problem(c, seed++);
      Problem widened = half;
      widened.c.format = widened.w.format = WeightFormat::F32;
      const std::vector<float> values = half.w.dequantized();
      widened.w.data.resize(values.size() * 4);
      std::memcpy(widened.w.data.data(), values.data(), widened.w.data.size());
      std::vector<float> y_half = half.y0, y_f32 = widened.y0;
      path().run(half.params(y_half.data()));
      path().run(widened.params(y_f32.data()));
      ASSERT_EQ(std::memcmp(y_half.data(), y_f32.data(), y_half.size() * 4), 0);
      // ... and so within the F32 paths' reordering tolerance of ref::gemm.
      expect_close(half, magnitudes(half), y_half, run_ref(half), kF32Tol, path().name);
    }
}

// --- the grid ---------------------------------------------------------------------------

class GemmGrid : public GemmPath {};

// One test per (path, format): the formats decode differently on every path.
void check_grid(const Path& path, WeightFormat f) {
  std::vector<int64_t> ks{32, 64, 96, 160, 544};
  if (f != WeightFormat::FP4 && f != WeightFormat::ROWFP8) ks.insert(ks.end(), {1, 17, 48, 100});
  uint32_t i = 0;
  for (int64_t m : {0, 1, 2, 3, 7, 16, 17, 64, 130})
    for (int64_t n : {1, 31, 32, 33, 96, 257})
      for (int64_t k : ks) {
        // Strides, accumulate and precision rotate through the grid so each shape
        // class meets each of them without multiplying the run time.
        Case c{f,
               m,
               n,
               k,
               (i % 3) * 5,
               ((i / 3) % 2) * 3,
               (i / 2) % 2 == 1,
               (i / 4) % 3 == 2 ? GemmPrecision::Bf16 : GemmPrecision::F32};
        check_case(path, c, 1000 + i++);
      }
}

TEST_P(GemmGrid, F32MatchesRef) {
  check_grid(path(), WeightFormat::F32);
}
TEST_P(GemmGrid, BF16MatchesRef) {
  check_grid(path(), WeightFormat::BF16);
}
TEST_P(GemmGrid, F16MatchesRef) {
  if (!runs_f16(path())) GTEST_SKIP() << path().name << ": " << kNoF16c;
  check_grid(path(), WeightFormat::F16);
}
TEST_P(GemmGrid, FP8MatchesRef) {
  check_grid(path(), WeightFormat::FP8);
}
TEST_P(GemmGrid, FP4MatchesRef) {
  check_grid(path(), WeightFormat::FP4);
}
TEST_P(GemmGrid, ROWFP8MatchesRef) {
  check_grid(path(), WeightFormat::ROWFP8);
}

// K longer than one buffered block (1024 f32 / 2048 bf16 columns): partial sums of
// several k blocks must add up, in decode (M <= 16) and prefill order.
TEST_P(GemmPath, LongKSpansSeveralBlocks) {
  uint32_t seed = 500;
  for (WeightFormat f : formats_for(path()))
    for (int64_t m : {1, 17})
      for (int64_t k : {1056, 4160}) {
        Case c{f, m, 9, k};
        c.accumulate = seed % 2;
        c.precision = (seed / 2) % 2 ? GemmPrecision::Bf16 : GemmPrecision::F32;
        check_case(path(), c, seed++);
      }
}

// The problem on `path` with each thread count, against ref.
void check_on_threads(const Path& path, const Problem& pr, std::initializer_list<int> thread_counts) {
  const std::vector<float> ref = run_ref(pr);
  const std::vector<double> mag = magnitudes(pr);
  for (int threads : thread_counts) {
    set_num_threads(threads);
    std::vector<float> y = pr.y0;
    path.run(pr.params(y.data()));
    expect_close(pr, mag, y, ref, kF32Tol, path.name + std::string(" threads ") + std::to_string(threads));
  }
  set_num_threads(0);
}

// The FP4 routed experts of a decode step (v41-small: w1 / w3 [1024 x 2048], w2
// [2048 x 1024]) at the rows a batch of 1-16 gives an expert, through the AVX-512 tiles
// that prefetch the rows two tiles on: whole ranges, a ragged last tile (N = 1030) and 1,
// 2 or 3 threads (ranges whose prefetch targets end inside or past them) against ref.
TEST_P(GemmPath, Fp4ExpertShapesAtDecodeRows) {
  const std::pair<int64_t, int64_t> shapes[] = {{1024, 2048}, {2048, 1024}, {1030, 2048}};
  uint32_t seed = 700;
  for (auto [n, k] : shapes)
    for (int64_t m : {1, 2, 3, 4, 8, 16}) {
      Case c{WeightFormat::FP4, m, n, k};
      c.accumulate = seed % 3 == 0;
      SCOPED_TRACE(c.str());
      check_on_threads(path(), make_problem(c, seed++), {1, 2, 3});
    }
}

// The FP8 GEMMs of a v41-small decode step (attention wq_a [768 x 2048], wq_b
// [2048 x 768], one wo_a group [512 x 512], wo_b [2048 x 2048]; shared expert w1 / w3
// [1024 x 2048], w2 [2048 x 1024]) at the rows of a batch of 1-16, on 1, 2 and 3 threads
// against ref: the AVX-512 direct tiles (M <= 4, and M = 8, 16 in passes of 4 rows)
// prefetch the rows two tiles on and fold the scales into x. N = 1030 gives thread ranges
// that start off a multiple of 4 and of 32 (tiles straddling a 32x32 scale tile) and end
// in a ragged tile; a few rows hold NaN codes (0x7F / 0xFF), whose dot products are NaN
// for every x.
TEST_P(GemmPath, Fp8DecodeShapesOfV41Small) {
  const std::pair<int64_t, int64_t> shapes[] = {{768, 2048}, {2048, 768},  {512, 512},  {2048, 2048},
                                                {1024, 2048}, {2048, 1024}, {1030, 2048}, {1030, 768}};
  uint32_t seed = 800;
  for (auto [n, k] : shapes)
    for (int64_t m : {1, 2, 3, 4, 8, 16}) {
      if (n * k > 1024 * 2048 && m > 4) continue;  // ref's time; the panels' rows are the same
      Case c{WeightFormat::FP8, m, n, k};
      c.accumulate = seed % 3 == 0;
      SCOPED_TRACE(c.str());
      Problem pr = make_problem(c, seed++);
      for (int64_t r : {int64_t{5}, n / 2 + 1, n - 1})  // one NaN code each, anywhere in the row
        pr.w.data[r * k + (r * 37) % k] = r % 2 ? 0x7F : 0xFF;
      check_on_threads(path(), pr, {1, 2, 3});
    }
}

// WeightView::no_nan_codes lets the FP8 tiles skip their NaN test (gemm_avx2.cpp,
// fp8_shared_scale_blocks). On weights without NaN codes it is the same GEMM: every row
// of M = 1..4, 8 and 20, bit for bit with and without the flag, on 1 and 2 threads, at
// shapes whose thread ranges start off a 32x32 scale tile and end in a ragged tile, with
// scale codes of every class (x-folded or not: 1, 135 and the random 110..135).
TEST_P(GemmPath, Fp8WithoutTheNanTestIsTheSameGemm) {
  const std::pair<int64_t, int64_t> shapes[] = {{1030, 768}, {96, 80}, {64, 2048}};
  uint32_t seed = 1200;
  for (auto [n, k] : shapes)
    for (int64_t m : {1, 2, 3, 4, 8, 20}) {
      Case c{WeightFormat::FP8, m, n, k};
      c.accumulate = seed % 2 == 0;
      SCOPED_TRACE(c.str());
      Problem pr = make_problem(c, seed++);
      for (uint8_t& b : pr.w.data)
        if ((b & 0x7F) == 0x7F) b ^= 1;
      for (size_t i = 0; i < pr.w.scale.size(); i += 5) pr.w.scale[i] = i % 2 ? 135 : 1;
      ASSERT_TRUE(e4m3_nan_free(pr.w.data.data(), static_cast<int64_t>(pr.w.data.size())));
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<float> tested = pr.y0, skipped = pr.y0;
        path().run(pr.params(tested.data()));
        GemmParams p = pr.params(skipped.data());
        p.w.no_nan_codes = true;
        path().run(p);
        EXPECT_EQ(std::memcmp(tested.data(), skipped.data(), tested.size() * 4), 0)
            << path().name << " threads " << threads;
      }
    }
  set_num_threads(0);
}

// The AVX-512 FP8 tiles of M <= 4 (AVX2's of M = 1) multiply x by a block's 2^120·scale
// instead of the weights where that product is exact for the whole block (E4m3TileRows,
// x_fold_ranges).
// Here blocks hold x that the largest scale codes would overflow (1.5·2^100 with code 134:
// 2^127) and x whose product with the smallest codes falls below the normals (a full
// mantissa at 2^-126 or a subnormal, with code 1: 2^-6), beside ordinary ones, under
// every code class (1, 7, 8, 127, 134, 135, 200): each row of M = 1..4 and of M = 8 (the
// direct tiles in passes), and rows 1..3 each alone, must equal bit for bit the same row in an M = 20 call (the
// prefill panels, which scale the weights), on 1 and 2 threads; and the sums stay near
// ref's wherever ref is finite.
TEST_P(GemmPath, Fp8ScaleFoldedIntoXOnlyWhereExact) {
  constexpr int64_t kN = 64, kK = 64;
  const uint8_t codes[][4] = {{134, 1, 127, 8}, {7, 135, 200, 134}, {1, 1, 134, 134}};
  uint32_t seed = 950;
  for (const auto& tile_codes : codes) {
    std::mt19937 rng(seed++);
    TestWeight w = random_weight(WeightFormat::FP8, kN, kK, rng);
    w.scale.assign(tile_codes, tile_codes + 4);  // [2 x 2] 32x32 tiles
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> x(20 * kK);
    for (float& v : x) v = uni(rng);
    x[0 * kK + 3] = 0x1.8p100f;                   // row 0, block 0: too big for code 134
    x[1 * kK + 40] = 0x1.000002p-126f;            // row 1, block 1: loses bits at 2^-6
    x[1 * kK + 41] = 3 * 0x1p-149f;               // a subnormal beside it
    for (int64_t k = 0; k < 32; ++k) x[3 * kK + k] = 0.0f;  // row 3, block 0: zeros only
    x[3 * kK + 50] = -0x1.fffffep-120f;           // row 3, block 1: small but exact
    for (int64_t i = 4; i < 20; ++i)  // rows 4..19 repeat rows 0..3
      std::copy(x.begin() + (i % 4) * kK, x.begin() + (i % 4 + 1) * kK, x.begin() + i * kK);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      auto run = [&](int64_t m, int64_t first_row = 0) {
        std::vector<float> y(m * kN, kSentinel);
        GemmParams p;
        p.x = x.data() + first_row * kK;
        p.w = w.view();
        p.y = y.data();
        p.m = m;
        path().run(p);
        return y;
      };
      const std::vector<float> panel = run(20);
      for (int64_t m : {1, 2, 3, 4, 8}) {
        const std::vector<float> direct = run(m);
        EXPECT_EQ(std::memcmp(direct.data(), panel.data(), direct.size() * 4), 0)
            << path().name << " codes " << int{tile_codes[0]} << ".. m=" << m << " threads " << threads;
      }
      // Each of rows 1..3 alone (M = 1, where the AVX2 tiles fold): its own blocks decide.
      for (int64_t i = 1; i < 4; ++i) {
        const std::vector<float> alone = run(1, i);
        EXPECT_EQ(std::memcmp(alone.data(), panel.data() + i * kN, alone.size() * 4), 0)
            << path().name << " codes " << int{tile_codes[0]} << ".. row " << i << " alone, threads " << threads;
      }
      std::vector<float> ref(20 * kN);
      {
        ScopedBackend b(Backend::Ref);
        GemmParams p;
        p.x = x.data();
        p.w = w.view();
        p.y = ref.data();
        p.m = 20;
        gemm(p);
      }
      const std::vector<float> wd = w.dequantized();
      for (int64_t i = 0; i < 20; ++i)
        for (int64_t n = 0; n < kN; ++n) {
          double mag = 0;  // Σ|x·w|: the scale of any summation order's rounding
          for (int64_t k = 0; k < kK; ++k) mag += std::fabs(double{x[i * kK + k]} * wd[n * kK + k]);
          if (!std::isfinite(ref[i * kN + n])) continue;
          EXPECT_NEAR(panel[i * kN + n], ref[i * kN + n], kF32Tol * mag + 1e-30) << "y[" << i << "][" << n << "]";
        }
    }
    set_num_threads(0);
  }
}

// M larger than one prefill slab of x rows (516): slabs must cover every row once.
TEST_P(GemmPath, TallMSpansSeveralSlabs) {
  uint32_t seed = 900;
  for (WeightFormat f : {WeightFormat::FP8, WeightFormat::FP4})
    for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16}) {
      Case c{f, 1100, 37, 96};
      c.precision = prec;
      c.accumulate = prec == GemmPrecision::Bf16;
      c.y_pad = 3;
      check_case(path(), c, seed++);
    }
}

TEST_P(GemmPath, EmptyK) {
  const Path& path = this->path();
  for (bool acc : {false, true}) {
    TestWeight w{WeightFormat::F32, 5, 0, {}, {}};
    {
      std::vector<float> y(10, 2.5f);
      GemmParams p;
      p.w = w.view();
      p.y = y.data();
      p.m = 2;
      p.accumulate = acc;
      path.run(p);
      EXPECT_EQ(y, std::vector<float>(10, acc ? 2.5f : 0.0f)) << path.name;
    }
  }
}

// Bf16 precision rounds x to bf16 (relative error <= 2^-9 per element), so against the
// exact f32 product it stays within 2^-8·Σ|x·w| (the documented Bf16 tolerance).
TEST_P(GemmPath, Bf16PrecisionWithinStatedBoundOfF32) {
  const Path& path = this->path();
  uint32_t seed = 77;
  for (WeightFormat f : formats_for(path))
    for (int64_t m : {1, 5, 40}) {
      Case c{f, m, 70, 320};
      SCOPED_TRACE(c.str());
      const Problem pr = make_problem(c, seed++);
      const std::vector<float> ref = run_ref(pr);
      const std::vector<double> mag = magnitudes(pr);
      {
        std::vector<float> y = pr.y0;
        GemmParams p = pr.params(y.data());
        p.precision = GemmPrecision::Bf16;
        path.run(p);
        expect_close(pr, mag, y, ref, 0x1p-8, path.name);
      }
    }
}

// Each y element is computed by one thread in a fixed order: bit-identical results for
// any thread count, in decode (small M) and prefill (large M) shapes. The M = 1 case
// has K = 8192, so a thread's range of N = 150 starts at row 19 (chunks of
// ceil(150 / 8) rows with 2 threads, past the 16 a GEMM asks for): its 4-row tiles
// then straddle the FP8 32-row scale groups (rows 31..34), which the AVX-512 decode
// path handles apart from tiles within one group; ref::gemm checks both.
TEST_P(GemmPath, ResultsDoNotDependOnThreadCount) {
  const std::pair<int64_t, int64_t> shapes[] = {{3, 301}, {40, 301}, {1, 150}};
  for (auto [m, n] : shapes)
    for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16}) {
      Case c{WeightFormat::FP8, m, n, m == 1 ? 8192 : 1100};
      c.precision = prec;
      SCOPED_TRACE(c.str());
      const Problem pr = make_problem(c, 5);
      std::vector<std::vector<float>> outs;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> y = pr.y0;
        path().run(pr.params(y.data()));
        outs.push_back(y);
      }
      set_num_threads(0);
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0);
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * 4), 0);
      if (prec == GemmPrecision::F32)
        expect_close(pr, magnitudes(pr), outs[1], run_ref(pr), kF32Tol, path().name);
    }
}

// A row's result does not depend on the rows batched with it: every path gives each
// row of an M-row call the bits it gives that row alone (M = 1), across its decode,
// direct and prefill loop nests, for every format, K spanning several chunks, with and
// without accumulation, with f32 products (what the forward runs). (A batch-dependent
// sum is a serving bug: a request's logits would change with the requests beside it,
// and sampled tokens with them.)
TEST_P(GemmPath, RowsDoNotDependOnTheBatch) {
  for (WeightFormat f : formats_for(path()))
    for (bool acc : {false, true}) {
      Case c{f, 40, 37, 2080};
      c.accumulate = acc;
      SCOPED_TRACE(c.str());
      const Problem pr = make_problem(c, 11);
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 40}) {
        GemmParams p = pr.params(nullptr);
        p.m = m;
        std::vector<float> batch = pr.y0;
        p.y = batch.data();
        path().run(p);
        for (int64_t row = 0; row < m; ++row) {
          GemmParams one = pr.params(nullptr);
          one.m = 1;
          one.x = pr.x.data() + row * pr.ldx();
          std::vector<float> alone(pr.y0.begin() + row * pr.ldy(), pr.y0.begin() + (row + 1) * pr.ldy());
          one.y = alone.data();
          one.ldx = pr.ldx();
          one.ldy = pr.ldy();
          path().run(one);
          ASSERT_EQ(std::memcmp(alone.data(), batch.data() + row * pr.ldy(), size_t(c.n) * 4), 0)
              << "row " << row << " of a batch of " << m << " differs from the row alone";
        }
      }
    }
}

// The dispatched entry runs the active path: forcing each supported path through
// ScopedCpuPath gives that path's own result bit for bit.
TEST_P(GemmPath, DispatchRunsTheActivePath) {
  if (path().needs_bf16_dot != cpu_features().avx512bf16 && path().isa == CpuPath::Avx512)
    GTEST_SKIP() << "dispatch picks the other AVX-512 variant on this CPU";
  const Problem pr =
      make_problem({WeightFormat::FP4, 5, 33, 96, 0, 0, false, GemmPrecision::Bf16}, 9);
  std::vector<float> direct = pr.y0, dispatched = pr.y0;
  path().run(pr.params(direct.data()));
  {
    ScopedBackend b(Backend::Cpu);
    ScopedCpuPath c(path().isa);
    gemm(pr.params(dispatched.data()));
  }
  EXPECT_EQ(std::memcmp(direct.data(), dispatched.data(), direct.size() * 4), 0);
}

// Weights over one x at decode rows (a layer's q, k and v; an MLP's gate and up; the
// AVX-512 path runs them in one fork-join, gemm_avx512_shared_x): each y equals its own
// call on the path bit for bit, for each format family, widths off the 4-row tiles and
// the threads' chunks, accumulation, output strides, 1-3 threads and both precisions;
// nothing outside each y is written. A call mixing column orders runs one by one.
TEST_P(GemmPath, SharedXGivesEachGemmsOwnBits) {
  struct Out {
    WeightFormat format;
    int64_t n;
    bool accumulate;
    int64_t y_pad;
  };
  const std::vector<std::vector<Out>> calls = {
      {{WeightFormat::F16, 37, false, 0}, {WeightFormat::F16, 8, true, 2}, {WeightFormat::F32, 70, false, 3}},
      {{WeightFormat::BF16, 5, false, 0}, {WeightFormat::FP8, 40, true, 0}, {WeightFormat::FP4, 33, false, 1},
       {WeightFormat::ROWFP8, 64, false, 0}},
      {{WeightFormat::F16, 1030, false, 0}, {WeightFormat::F16, 258, true, 0}},
      {{WeightFormat::F16, 9, false, 0}, {WeightFormat::FP8, 35, false, 0}},  // two orders
  };
  const bool avx512 = path().isa == CpuPath::Avx512;
  uint32_t seed = 700;
  for (const std::vector<Out>& call : calls)
    for (int64_t m = 1; m <= 4; ++m)
      for (GemmPrecision prec : {GemmPrecision::F32, GemmPrecision::Bf16})
        for (int threads : {1, 2, 3}) {
          if (!runs_f16(path()) && call[0].format == WeightFormat::F16) GTEST_SKIP() << kNoF16c;
          const int64_t k = call[0].n > 1000 ? 1056 : 160;
          SCOPED_TRACE(std::string(to_string(call[0].format)) + " call, m=" + std::to_string(m) +
                       ", threads " + std::to_string(threads) + (prec == GemmPrecision::Bf16 ? ", bf16" : ""));
          std::vector<Problem> prs;
          std::vector<std::vector<float>> want, got;
          std::vector<GemmParams> ps;
          for (const Out& o : call) {
            Case c{o.format, m, o.n, k, 5, o.y_pad, o.accumulate, prec};
            prs.push_back(make_problem(c, seed++));
          }
          set_num_threads(threads);
          for (size_t i = 0; i < call.size(); ++i) {
            GemmParams p = prs[i].params(nullptr);
            p.x = prs[0].x.data();  // one x, [m, k + 5] with NaN past k
            p.ldx = prs[0].ldx();
            want.push_back(prs[i].y0);
            got.push_back(prs[i].y0);
            p.y = want.back().data();
            path().run(p);
            p.y = got.back().data();
            ps.push_back(p);
          }
          if (avx512) {
            EXPECT_EQ(cpu::avx512_shares_x(ps), call[0].n != 9);
          }
          {
            ScopedBackend b(Backend::Cpu);
            ScopedCpuPath c(path().isa);
            gemm_shared_x(ps);
          }
          set_num_threads(0);
          for (size_t i = 0; i < call.size(); ++i)
            for (size_t j = 0; j < want[i].size(); ++j)
              ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(want[i][j]))
                  << "weight " << i << " y[" << j << "] = " << got[i][j] << ", alone " << want[i][j];
        }
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmPath, ::testing::Range(0, 4), path_name);
INSTANTIATE_TEST_SUITE_P(Paths, GemmGrid, ::testing::Range(0, 4), path_name);

// --- validation ---------------------------------------------------------------------------

TEST(Gemm, RejectsBadParams) {
  std::vector<float> x(64, 1.0f), y(64, 0.0f);
  std::vector<uint8_t> q(64 * 64, 0), s(256, 127);
  auto base = [&] {
    GemmParams p;
    p.x = x.data();
    p.y = y.data();
    p.m = 1;
    p.w = {WeightFormat::FP8, 2, 32, q.data(), s.data()};
    return p;
  };
  auto expect_error = [](const GemmParams& p, const std::string& needle) {
    try {
      gemm(p);
      ADD_FAILURE() << "no error, wanted one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(gemm(base()));
  GemmParams p = base();
  p.m = -1;
  expect_error(p, "m (");
  p = base();
  p.x = nullptr;
  expect_error(p, "x is null");
  p = base();
  p.y = nullptr;
  expect_error(p, "y is null");
  p = base();
  p.ldx = 31;
  expect_error(p, "ldx");
  p = base();
  p.ldy = 1;
  expect_error(p, "ldy");
  p = base();
  p.w.scale = nullptr;
  expect_error(p, "w.scale is null");
  p = base();
  p.w.data = nullptr;
  expect_error(p, "w.data is null");
  for (WeightFormat f : {WeightFormat::FP4, WeightFormat::ROWFP8}) {
    p = base();
    p.w.format = f;
    p.w.cols = 48;
    p.ldx = 48;
    expect_error(p, "multiple of 32");
  }
  p = base();  // m = 0 needs no buffers
  p.m = 0;
  p.x = nullptr;
  p.y = nullptr;
  EXPECT_NO_THROW(gemm(p));
}

}  // namespace
}  // namespace troupe::kernels
