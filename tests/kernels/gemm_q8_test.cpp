// The Q8_0 / Q4_0 GEMM (kernels/ggml_blocks.h, kernels/cpu/gemm_q8.h):
//   - the half codecs and row dequantizers against model/gguf_dequant's independent ones;
//   - the CPU activation quantizer bit for bit against ref::quantize_row_q8 (ties, zero
//     blocks, subnormal scales), and its per-lane Q4_0 offsets against their definition;
//   - ref::gemm_q8 against a double evaluation of the definition written here;
//   - FP4 weights under GemmPrecision::Int8 in the same tests (and against the exact
//     F32 GEMM where x needs no rounding);
//   - every CPU kernel (portable, AVX2, AVX-512 VNNI, the packed and row-group ones; one
//     test instance each, a kernel
//     the CPU lacks is skipped with the reason) against ref::gemm_q8 on a table of
//     awkward shapes, with poisoned outputs, sentinel guards and NaN row padding in x.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"
#include "kernels/parallel.h"
#include "kernels/q8_row_groups.h"
#include "kernels/quant.h"
#include "model/gguf_dequant.h"
#include "model/weights.h"

namespace troupe::kernels {
namespace {

constexpr float kSentinel = -4321.25f;

TEST(GgmlBlocks, HalfCodecsMatchTheModelLoadersOwn) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_decode(uint16_t(h)), want = model::f16_to_f32(uint16_t(h));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << h;
    else ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "code " << h;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    // Random f32 bit patterns around the half range, plus every exponent's edges.
    const uint32_t exp = 100 + uint32_t(rng()) % 50, bits = (uint32_t(rng()) & 0x807FFFFFu) | (exp << 23);
    const float x = std::bit_cast<float>(i % 7 == 0 ? uint32_t(rng()) : bits);
    ASSERT_EQ(f16_encode(x), model::f32_to_f16(x)) << "x bits " << std::bit_cast<uint32_t>(x);
  }
}

// Random blocks: int8 (with the -128 a file may hold) or nibbles, and f16 scales of both
// signs, some subnormal.
std::vector<uint8_t> random_blocks(WeightFormat f, int64_t rows, int64_t cols, std::mt19937& rng) {
  const int64_t bb = f == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes, blocks = rows * cols / 32;
  std::vector<uint8_t> out(static_cast<size_t>(blocks * bb));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out.data() + b * bb;
    const uint16_t h = model::f32_to_f16(b % 17 == 5 ? 3e-7f : scale(rng));
    std::memcpy(blk, &h, 2);
    for (int64_t i = 2; i < bb; ++i) blk[i] = uint8_t(rng());
  }
  return out;
}

// A random weight of a format on q8_0 activations: Q8_0 / Q4_0 blocks as above, or FP4
// (GemmPrecision::Int8): packed E2M1 codes and UE8M0 scales around 2^-5, a few 2^-127
// (the f32 subnormal code 0).
struct TestWeight {
  WeightFormat format;
  int64_t n, k;
  std::vector<uint8_t> data, scale;
  WeightView view() const { return {format, n, k, data.data(), scale.empty() ? nullptr : scale.data()}; }
  GemmPrecision precision() const { return format == WeightFormat::FP4 ? GemmPrecision::Int8 : GemmPrecision::F32; }
  // [n, k] as f32 (the GGUF decoders of model/gguf_dequant; FP4 decoded here from
  // MODEL.md §3: even column in the low nibble).
  std::vector<float> dense() const {
    std::vector<float> w(static_cast<size_t>(n * k));
    if (format != WeightFormat::FP4) {
      model::dequantize_ggml(format == WeightFormat::Q8_0 ? model::GgmlType::Q8_0 : model::GgmlType::Q4_0,
                             data.data(), n * k, w.data());
      return w;
    }
    for (int64_t i = 0; i < n * k; ++i) {
      const uint8_t code = i % 2 ? data[i / 2] >> 4 : data[i / 2] & 0xF;
      w[i] = e2m1_decode(code) * ue8m0_decode(scale[i / 32]);
    }
    return w;
  }
};

TestWeight random_weight(WeightFormat f, int64_t n, int64_t k, std::mt19937& rng) {
  if (f != WeightFormat::FP4) return {f, n, k, random_blocks(f, n, k, rng), {}};
  TestWeight w{f, n, k, std::vector<uint8_t>(static_cast<size_t>(n * k / 2)),
               std::vector<uint8_t>(static_cast<size_t>(n * k / 32))};
  for (uint8_t& c : w.data) c = uint8_t(rng());
  for (size_t b = 0; b < w.scale.size(); ++b) w.scale[b] = b % 13 == 7 ? 0 : uint8_t(118 + rng() % 8);
  return w;
}

TEST(GgmlBlocks, RowDequantizationIsTheGgufDefinition) {
  std::mt19937 rng(5);
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    const int64_t rows = 3, cols = 96;
    const std::vector<uint8_t> blocks = random_blocks(f, rows, cols, rng);
    std::vector<float> got(rows * cols), want(rows * cols);
    dequantize_rows({f, rows, cols, blocks.data(), nullptr}, 0, rows, got.data());
    model::dequantize_ggml(f == WeightFormat::Q8_0 ? model::GgmlType::Q8_0 : model::GgmlType::Q4_0,
                           blocks.data(), rows * cols, want.data());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << to_string(f);
  }
}

// Activation rows with the cases that matter to a quantizer: ties at .5 after scaling
// (amax 127 makes d = 1), an all-zero block, a block whose scale is a subnormal half.
std::vector<float> awkward_activations(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = normal(rng);
  for (int64_t r = 0; r < m; ++r) {
    float* row = x.data() + r * k;
    if (k >= 64)
      for (int i = 0; i < 32; ++i) row[32 + i] = i == 0 ? 127.0f : float(i % 9) - 4.5f;
    if (k >= 96) std::fill(row + 64, row + 96, 0.0f);
    if (k >= 128)
      for (int i = 0; i < 32; ++i) row[96 + i] *= 1e-6f;
  }
  return x;
}

// The portable, AVX2 and AVX-512 quantizers, each where the machine has it.
struct CpuQuantizer {
  const char* name;
  cpu::QGemmKernel path;  // the kernel whose path the quantizer needs
  void (*fn)(const float*, int64_t, int64_t, int64_t, int8_t*, float*, int32_t*, int32_t*, bool);
};
const CpuQuantizer kQuantizers[] = {
    {"portable", cpu::QGemmKernel::Portable, cpu::quantize_rows_q8},
    {"avx2", cpu::QGemmKernel::Avx2, cpu::quantize_rows_q8_avx2},
    {"avx512", cpu::QGemmKernel::Avx512Vnni, cpu::quantize_rows_q8_avx512},
};

class GemmQ8Quantizer : public ::testing::TestWithParam<int> {
 protected:
  const CpuQuantizer& quantizer() const { return kQuantizers[GetParam()]; }
  void SetUp() override {
    if (!cpu::q_kernel_supported(quantizer().path))
      GTEST_SKIP() << quantizer().name << ": " << cpu::missing_q_kernel_reason(quantizer().path);
  }
};

// Rows with a stride past k (the GEMM's ldx), several blocks each, the awkward blocks.
TEST_P(GemmQ8Quantizer, IsTheReferenceBitForBit) {
  const int64_t m = 5, k = 160, ldx = 200, blocks = k / 32;
  std::vector<float> x(m * ldx, 1e30f);  // read past k: the amax would show it
  const std::vector<float> rows = awkward_activations(m, k, 7);
  for (int64_t r = 0; r < m; ++r) std::copy_n(rows.data() + r * k, k, x.data() + r * ldx);
  std::vector<int8_t> q(m * k), q_ref(m * k);
  std::vector<float> d(m * blocks), d_ref(m * blocks);
  std::vector<int32_t> off(m * blocks * 8), sum(m * blocks);
  quantizer().fn(x.data(), m, k, ldx, q.data(), d.data(), off.data(), sum.data(), false);
  for (int64_t r = 0; r < m; ++r)
    ref::quantize_row_q8(x.data() + r * ldx, k, q_ref.data() + r * k, d_ref.data() + r * blocks);
  EXPECT_EQ(q, q_ref);
  ASSERT_EQ(std::memcmp(d.data(), d_ref.data(), d.size() * 4), 0);
  EXPECT_EQ(q[33], -4) << "x = -3.5 with d = 1 rounds to the even -4";
  EXPECT_EQ(q[34], -2) << "x = -2.5 with d = 1 rounds to the even -2";
  for (int64_t i = 0; i < m * blocks * 8; ++i) {
    const int8_t* lane = q.data() + i * 4;
    ASSERT_EQ(off[i], -8 * (lane[0] + lane[1] + lane[2] + lane[3])) << "lane " << i;
  }
  for (int64_t b = 0; b < m * blocks; ++b) {
    int32_t want = 0;
    for (int i = 0; i < 32; ++i) want += q[b * 32 + i];
    ASSERT_EQ(sum[b], want) << "block " << b;
  }
}

// fp4_order stores each block as [even columns | odd columns] of the reference's bytes,
// with the scales, lane offsets and sums of the stored order; no lane offsets or sums
// asked for leaves them unwritten.
TEST_P(GemmQ8Quantizer, Fp4OrderIsTheReferencesBytesEvenThenOdd) {
  const int64_t m = 2, k = 128, blocks = k / 32;
  const std::vector<float> x = awkward_activations(m, k, 11);
  std::vector<int8_t> q(m * k), q_ref(m * k);
  std::vector<float> d(m * blocks), d_ref(m * blocks);
  std::vector<int32_t> off(m * blocks * 8), sum(m * blocks);
  quantizer().fn(x.data(), m, k, k, q.data(), d.data(), off.data(), sum.data(), true);
  for (int64_t r = 0; r < m; ++r)
    ref::quantize_row_q8(x.data() + r * k, k, q_ref.data() + r * k, d_ref.data() + r * blocks);
  ASSERT_EQ(std::memcmp(d.data(), d_ref.data(), d.size() * 4), 0);
  for (int64_t b = 0; b < m * blocks; ++b) {
    int32_t want_sum = 0;
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(q[b * 32 + i], q_ref[b * 32 + 2 * i]) << "block " << b << " even column " << 2 * i;
      ASSERT_EQ(q[b * 32 + 16 + i], q_ref[b * 32 + 2 * i + 1]) << "block " << b << " odd column " << 2 * i + 1;
      want_sum += q_ref[b * 32 + 2 * i] + q_ref[b * 32 + 2 * i + 1];
    }
    ASSERT_EQ(sum[b], want_sum) << "block " << b;
    for (int lane = 0; lane < 8; ++lane) {
      const int8_t* v = q.data() + b * 32 + 4 * lane;
      ASSERT_EQ(off[b * 8 + lane], -8 * (v[0] + v[1] + v[2] + v[3]));
    }
  }
  std::vector<int8_t> q2(m * k);
  std::vector<float> d2(m * blocks);
  quantizer().fn(x.data(), m, k, k, q2.data(), d2.data(), nullptr, nullptr, true);
  EXPECT_EQ(q2, q);
}

// Rows of 37 blocks without lane offsets, the GEMMs' prefill case: the vector quantizers
// take whole batches (16 blocks on AVX-512, 8 on AVX2) with the reductions and divisions
// done across blocks, and the rest block by block. The awkward blocks sit inside
// batches and in the tail: an amax tie for rounding, zeros, tiny values, a scale whose f16
// is subnormal, one past the f16 range (its d is inf), an infinite x (d = inf, id = 0:
// the block's codes 0 but the infinite one's), a NaN x (ignored by the amax; its code
// -128), and a block of f32 subnormals (id = inf: every code -128). Bytes, scales and sums
// are the reference's, with and without sums, in both orders.
TEST_P(GemmQ8Quantizer, WholeBatchesAreTheReferenceBitForBit) {
  const int64_t m = 3, blocks = 37, k = blocks * 32, ldx = k + 64;
  const std::vector<float> rows = awkward_activations(m, k, 17);
  std::vector<float> x(m * ldx, 1e30f);  // read past k: the amax would show it
  for (int64_t r = 0; r < m; ++r) {
    float* row = x.data() + r * ldx;
    std::copy_n(rows.data() + r * k, k, row);
    for (int i = 0; i < 32; ++i) {
      row[17 * 32 + i] *= 1e7f;   // scale ~ 3e5: f16 inf
      row[20 * 32 + i] *= 1e-3f;  // scale ~ 3e-5: a subnormal f16
      row[30 * 32 + i] = 0.0f;
      row[33 * 32 + i] = i == 5 ? -127.0f : float(i % 5) - 2.5f;  // d = 1: ties to even
      row[12 * 32 + i] *= 1e-40f;  // f32 subnormals: d / 127 is one too, 1 / it is inf
      row[36 * 32 + i] *= 1e-40f;
    }
    row[9 * 32 + 4] = INFINITY;
    row[35 * 32 + 30] = -INFINITY;
    row[25 * 32 + 7] = NAN;
    row[34 * 32 + 1] = NAN;
  }
  std::vector<int8_t> q_ref(m * k);
  std::vector<float> d_ref(m * blocks);
  for (int64_t r = 0; r < m; ++r)
    ref::quantize_row_q8(x.data() + r * ldx, k, q_ref.data() + r * k, d_ref.data() + r * blocks);
  ASSERT_TRUE(std::isinf(d_ref[17])) << d_ref[17];
  ASSERT_GT(d_ref[20], 0.0f);
  ASSERT_LT(d_ref[20], 6.1e-5f);
  for (int i = 0; i < 32; ++i) {  // the reference's rule for what no int8 holds
    ASSERT_EQ(q_ref[12 * 32 + i], -128) << i;
    ASSERT_EQ(q_ref[9 * 32 + i], i == 4 ? -128 : 0) << i;
  }
  ASSERT_EQ(q_ref[25 * 32 + 7], -128);
  for (const bool fp4_order : {false, true})
    for (const bool sums : {true, false}) {
      std::vector<int8_t> q(m * k);
      std::vector<float> d(m * blocks);
      std::vector<int32_t> sum(m * blocks, 12345);
      quantizer().fn(x.data(), m, k, ldx, q.data(), d.data(), nullptr, sums ? sum.data() : nullptr,
                     fp4_order);
      ASSERT_EQ(std::memcmp(d.data(), d_ref.data(), d.size() * 4), 0) << "fp4_order " << fp4_order;
      for (int64_t b = 0; b < m * blocks; ++b) {
        int32_t want = 0;
        for (int i = 0; i < 32; ++i) {
          const int src = fp4_order ? (i < 16 ? 2 * i : 2 * (i - 16) + 1) : i;
          ASSERT_EQ(q[b * 32 + i], q_ref[b * 32 + src])
              << "block " << b << " column " << i << " fp4_order " << fp4_order;
          want += q[b * 32 + i];
        }
        ASSERT_EQ(sum[b], sums ? want : 12345) << "block " << b;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmQ8Quantizer, ::testing::Range(0, 3),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kQuantizers[i.param].name); });

// The definition in double: x quantized here (f32 arithmetic as defined, the half
// rounding of the scale by model::f32_to_f16), weights by model::dequantize_ggml.
std::vector<double> definition(const TestWeight& tw, const std::vector<float>& x, int64_t m) {
  const int64_t n = tw.n, k = tw.k;
  const std::vector<float> w = tw.dense();
  std::vector<double> xq(m * k);
  for (int64_t i = 0; i < m * k / 32; ++i) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * 32 + j]));
    const float d = amax / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
    const double d16 = model::f16_to_f32(model::f32_to_f16(d));
    for (int j = 0; j < 32; ++j) xq[i * 32 + j] = double(std::lrint(x[i * 32 + j] * inv)) * d16;
  }
  std::vector<double> y(m * n, 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t j = 0; j < k; ++j) y[r * n + c] += double(w[c * k + j]) * xq[r * k + j];
  return y;
}

// Σ |w·xq| per output: the scale of any summation order's rounding error.
std::vector<double> magnitudes(const TestWeight& tw, const std::vector<float>& x, int64_t m) {
  const int64_t n = tw.n, k = tw.k;
  const std::vector<float> w = tw.dense();
  std::vector<double> mag(m * n, 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t j = 0; j < k; ++j) mag[r * n + c] += std::fabs(double(w[c * k + j]) * x[r * k + j]);
  return mag;
}

TEST(GemmQ8, ReferenceIsTheDefinition) {
  std::mt19937 rng(11);
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::FP4}) {
    const int64_t m = 4, n = 7, k = 160;
    const TestWeight tw = random_weight(f, n, k, rng);
    const std::vector<float> x = awkward_activations(m, k, 13);
    std::vector<float> y(m * n, NAN);
    GemmParams p;
    p.x = x.data();
    p.w = tw.view();
    p.precision = tw.precision();
    p.y = y.data();
    p.m = m;
    ref::gemm(p);
    const std::vector<double> want = definition(tw, x, m);
    const std::vector<double> mag = magnitudes(tw, x, m);
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(y[i], want[i], 1e-5 * mag[i] + 1e-30) << to_string(f) << " output " << i;
  }
}

struct Case {
  WeightFormat format;
  int64_t m, n, k;
  int64_t x_pad = 0, y_pad = 0;
  bool accumulate = false;
};

const Case kCases[] = {
    {WeightFormat::Q8_0, 1, 1, 32},       {WeightFormat::Q4_0, 1, 1, 32},
    {WeightFormat::Q8_0, 1, 37, 96, 5, 3}, {WeightFormat::Q4_0, 1, 37, 96, 5, 3},
    {WeightFormat::Q8_0, 3, 5, 160},      {WeightFormat::Q4_0, 3, 5, 160, 0, 0, true},
    {WeightFormat::Q8_0, 16, 33, 256, 0, 0, true}, {WeightFormat::Q4_0, 16, 33, 256},
    {WeightFormat::Q8_0, 17, 70, 192, 32, 1}, {WeightFormat::Q4_0, 17, 70, 192, 32, 1},
    {WeightFormat::Q8_0, 70, 9, 64},      {WeightFormat::Q4_0, 130, 6, 96},
    {WeightFormat::Q8_0, 5, 300, 1024},   {WeightFormat::Q4_0, 2, 517, 512},
    // Packed-kernel edges: 6-row tiles plus a remainder, a 16-wide panel edge, 48 columns.
    {WeightFormat::Q8_0, 23, 48, 128, 3, 2, true}, {WeightFormat::Q4_0, 41, 79, 320, 0, 5},
    {WeightFormat::Q8_0, 64, 16, 64},     {WeightFormat::Q4_0, 19, 1, 32, 1, 0, true},
    // Row-group edges: one group exactly, a group and a row, two tiles of two groups and
    // a half, 1..5 activation rows (the 4-row tiles and their remainder).
    {WeightFormat::Q8_0, 2, 16, 64},      {WeightFormat::Q4_0, 5, 17, 128, 2, 1, true},
    {WeightFormat::Q8_0, 4, 72, 160, 0, 3, true}, {WeightFormat::Q4_0, 1, 72, 160},
    {WeightFormat::Q4_0, 3, 31, 1024},    {WeightFormat::Q8_0, 1, 33, 4096, 7, 0},
    // FP4 under GemmPrecision::Int8: odd block counts, tile edges, decode widths.
    {WeightFormat::FP4, 1, 1, 32},        {WeightFormat::FP4, 1, 37, 96, 5, 3},
    {WeightFormat::FP4, 3, 5, 160, 0, 0, true}, {WeightFormat::FP4, 16, 33, 256},
    {WeightFormat::FP4, 17, 70, 192, 32, 1, true}, {WeightFormat::FP4, 4, 300, 1024},
    {WeightFormat::FP4, 70, 9, 64},
    // Row-group prefill tiles (6 rows x 2 groups, above kGroupsDecodeMaxRows rows): a part
    // group after whole tiles, a row remainder of 1 and of 5, strides, accumulation.
    {WeightFormat::Q8_0, 67, 83, 320, 2, 3, true}, {WeightFormat::Q4_0, 71, 50, 160, 0, 1},
};

std::string case_str(const Case& c) {
  return std::string(to_string(c.format)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
         " k=" + std::to_string(c.k) + " ldx+" + std::to_string(c.x_pad) + " ldy+" +
         std::to_string(c.y_pad) + (c.accumulate ? " acc" : "");
}

constexpr cpu::QGemmKernel kKernels[] = {cpu::QGemmKernel::Portable, cpu::QGemmKernel::Avx2,
                                         cpu::QGemmKernel::Avx512Vnni,
                                         cpu::QGemmKernel::Avx512VnniPacked,
                                         cpu::QGemmKernel::Avx512VnniGroups,
                                         cpu::QGemmKernel::Avx2Groups,
                                         cpu::QGemmKernel::AmxGroups,
                                         cpu::QGemmKernel::AmxGroupsEmulated};

bool groups_kernel(cpu::QGemmKernel k) {
  return k == cpu::QGemmKernel::Avx512VnniGroups || k == cpu::QGemmKernel::Avx2Groups ||
         k == cpu::QGemmKernel::AmxGroups || k == cpu::QGemmKernel::AmxGroupsEmulated;
}

// The packed kernel (any M on Avx512VnniPacked, M >= kPackedMinRows on Avx512Vnni) and
// the row-group ones (Avx512VnniGroups, Avx2Groups, given row groups) add the blocks in
// the reference's order with the reference's f32 steps: bit for bit.
bool bit_exact(cpu::QGemmKernel k, int64_t m, WeightFormat f) {
  if (groups_kernel(k)) return true;  // FP4 too
  if (f == WeightFormat::FP4) return false;  // no packed FP4 kernel
  return k == cpu::QGemmKernel::Avx512VnniPacked ||
         (k == cpu::QGemmKernel::Avx512Vnni && m >= cpu::kPackedMinRows);
}

class GemmQ8Kernel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!cpu::q_kernel_supported(kernel()))
      GTEST_SKIP() << to_string(kernel()) << ": " << cpu::missing_q_kernel_reason(kernel());
  }
  static cpu::QGemmKernel kernel() { return kKernels[GetParam()]; }
};

TEST_P(GemmQ8Kernel, EveryCaseMatchesTheReference) {
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    SCOPED_TRACE(case_str(c));
    std::mt19937 rng(seed++);
    const int64_t ldx = c.k + c.x_pad, ldy = c.n + c.y_pad;
    const TestWeight tw = random_weight(c.format, c.n, c.k, rng);
    const std::vector<float> dense = awkward_activations(c.m, c.k, seed);
    std::vector<float> x(c.m * ldx, NAN);  // NaN padding: a read past K poisons y
    for (int64_t r = 0; r < c.m; ++r) std::copy_n(dense.data() + r * c.k, c.k, x.data() + r * ldx);
    std::vector<float> y0((c.m + 1) * ldy, kSentinel);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j) y0[r * ldy + j] = c.accumulate ? uni(rng) : NAN;
    GemmParams p;
    p.x = x.data();
    p.w = tw.view();
    p.precision = tw.precision();
    p.m = c.m;
    p.ldx = ldx;
    p.ldy = ldy;
    p.accumulate = c.accumulate;
    std::vector<float> want = y0, got = y0;
    p.y = want.data();
    ref::gemm_q8(p);
    std::vector<uint8_t> groups;  // the row-group kernel's layout of the same weight
    if (groups_kernel(kernel())) {
      groups.assign(size_t(q8_row_groups_bytes(p.w)), 0xA5);
      pack_q8_row_groups(p.w, groups.data());
      p.w.groups = groups.data();
    }
    p.y = got.data();
    cpu::gemm_q8(p, kernel());
    const std::vector<double> mag = magnitudes(tw, dense, c.m);
    int failures = 0;
    for (int64_t r = 0; r < c.m + 1; ++r)
      for (int64_t j = 0; j < ldy; ++j) {
        const int64_t i = r * ldy + j;
        if (r == c.m || j >= c.n) {  // guard cells untouched
          if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(kSentinel) && failures++ < 5)
            ADD_FAILURE() << "guard (" << r << ", " << j << ") written: " << got[i];
          continue;
        }
        const double tol = 1e-5 * (mag[r * c.n + j] + (c.accumulate ? std::fabs(y0[i]) : 0.0)) + 1e-30;
        if (bit_exact(kernel(), c.m, c.format)) {
          if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && failures++ < 5)
            ADD_FAILURE() << "y(" << r << ", " << j << ") = " << got[i] << ", ref " << want[i] << " (bits differ)";
          continue;
        }
        if (!(std::fabs(double(got[i]) - want[i]) <= tol) && failures++ < 5)
          ADD_FAILURE() << "y(" << r << ", " << j << ") = " << got[i] << ", ref " << want[i];
      }
    EXPECT_EQ(failures, 0);
  }
}

// The codes at int8's ends, where a kernel's int16 pair sums are closest to saturating:
// Q8_0 weights of -128 (a file may hold it) and 127 against activations that quantize to
// +-127 (AVX2's prefill pairs |q| = 128 with x ^ 0xFF = -128: a pair of exactly -32768).
// Every kernel at decode and prefill rows equals ref::gemm_q8 (bit for bit where it
// shares the reference's order).
TEST_P(GemmQ8Kernel, Q8_0ExtremeCodesStayExact) {
  const int64_t n = 32, k = 64, blocks = n * k / 32;
  TestWeight tw{WeightFormat::Q8_0, n, k, std::vector<uint8_t>(size_t(blocks * kQ8_0Bytes)), {}};
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = tw.data.data() + b * kQ8_0Bytes;
    const uint16_t one = model::f32_to_f16(1.0f);
    std::memcpy(blk, &one, 2);
    const int64_t row = b / (k / 32);
    for (int i = 0; i < 32; ++i) {  // rows in fours: all -128, all 127, alternating, -128 / 0
      const int8_t q = row % 4 == 0   ? -128
                       : row % 4 == 1 ? 127
                       : row % 4 == 2 ? (i % 2 ? 127 : -128)
                                      : (i % 2 ? 0 : -128);
      blk[2 + i] = static_cast<uint8_t>(q);
    }
  }
  for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}, cpu::kGroupsDecodeMaxRows + 3}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    std::vector<float> x(size_t(m * k));
    for (int64_t r = 0; r < m; ++r)  // rows: all +1, all -1, alternating, +1 / 0
      for (int64_t i = 0; i < k; ++i)
        x[r * k + i] = r % 4 == 0   ? 1.0f
                       : r % 4 == 1 ? -1.0f
                       : r % 4 == 2 ? (i % 2 ? -1.0f : 1.0f)
                                    : (i % 2 ? 0.0f : 1.0f);
    std::vector<uint8_t> groups;
    GemmParams p;
    p.x = x.data();
    p.w = tw.view();
    p.m = m;
    if (groups_kernel(kernel())) {
      groups.assign(size_t(q8_row_groups_bytes(p.w)), 0xA5);
      pack_q8_row_groups(p.w, groups.data());
      p.w.groups = groups.data();
    }
    std::vector<float> want(size_t(m * n), NAN), got(size_t(m * n), NAN);
    p.y = want.data();
    ref::gemm_q8(p);
    p.y = got.data();
    cpu::gemm_q8(p, kernel());
    for (size_t i = 0; i < got.size(); ++i) {
      if (bit_exact(kernel(), m, WeightFormat::Q8_0)) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "y[" << i << "]";
      } else {
        ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i])) << "y[" << i << "]";
      }
    }
  }
}

// Weights over one x in one call (a layer's q, k, v; an MLP's gate and up): each y is the
// one its own gemm_q8 call gives on the same kernel, bit for bit, whatever mix of
// formats, row groups, widths (off the 4 / 16 / 32-column units), accumulation and
// output strides, at decode and prefill row counts; nothing outside each y is written.
TEST_P(GemmQ8Kernel, SharedXGivesEachGemmsOwnBits) {
  struct Out {
    WeightFormat format;
    int64_t n;
    bool groups, accumulate;
    int64_t y_pad;
  };
  const std::vector<std::vector<Out>> calls = {
      {{WeightFormat::Q8_0, 40, true, false, 0}, {WeightFormat::Q4_0, 17, true, true, 3},
       {WeightFormat::Q4_0, 72, false, false, 1}},
      {{WeightFormat::Q4_0, 33, true, false, 0}, {WeightFormat::Q4_0, 33, true, false, 0}},
      {{WeightFormat::FP4, 37, false, false, 2}, {WeightFormat::FP4, 5, false, true, 0}},
      // FP4 with row groups takes x in column order, without them (SIMD) in fp4_order:
      // neighbours of either kind share x only where the orders agree.
      {{WeightFormat::FP4, 37, true, false, 2}, {WeightFormat::FP4, 5, false, true, 0},
       {WeightFormat::FP4, 20, true, true, 1}, {WeightFormat::Q4_0, 33, true, false, 0}},
  };
  const int64_t k = 160, ldx = k + 7;
  uint32_t seed = 300;
  for (const std::vector<Out>& call : calls)
    for (int64_t m : {int64_t{1}, int64_t{3}, cpu::kPackedMinRows + 1, cpu::kGroupsDecodeMaxRows + 6}) {
      if (call[0].format == WeightFormat::FP4 && m > kInt8MaxRows) continue;
      SCOPED_TRACE(std::string(to_string(call[0].format)) + " call, m=" + std::to_string(m));
      std::mt19937 rng(seed++);
      const std::vector<float> dense = awkward_activations(m, k, seed);
      std::vector<float> x(m * ldx, NAN);
      for (int64_t r = 0; r < m; ++r) std::copy_n(dense.data() + r * k, k, x.data() + r * ldx);
      std::vector<TestWeight> ws;
      std::vector<std::vector<uint8_t>> groups;
      std::vector<std::vector<float>> want, got;
      std::vector<GemmParams> ps;
      for (const Out& o : call) {
        ws.push_back(random_weight(o.format, o.n, k, rng));
        groups.emplace_back(o.groups ? size_t(q8_row_groups_bytes(ws.back().view())) : 0);
        if (o.groups) pack_q8_row_groups(ws.back().view(), groups.back().data());
        std::vector<float> y0((m + 1) * (o.n + o.y_pad), kSentinel);
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t j = 0; j < o.n; ++j) y0[r * (o.n + o.y_pad) + j] = o.accumulate ? uni(rng) : NAN;
        want.push_back(y0);
        got.push_back(y0);
      }
      for (size_t i = 0; i < call.size(); ++i) {
        GemmParams p;
        p.x = x.data();
        p.w = ws[i].view();
        p.w.groups = groups[i].empty() ? nullptr : groups[i].data();
        p.precision = ws[i].precision();
        p.m = m;
        p.ldx = ldx;
        p.ldy = call[i].n + call[i].y_pad;
        p.accumulate = call[i].accumulate;
        p.y = want[i].data();
        cpu::gemm_q8(p, kernel());
        p.y = got[i].data();
        ps.push_back(p);
      }
      cpu::gemm_q8_shared_x(ps, kernel());
      for (size_t i = 0; i < call.size(); ++i)
        for (size_t j = 0; j < want[i].size(); ++j)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(want[i][j]))
              << "weight " << i << " y[" << j << "] = " << got[i][j] << ", alone " << want[i][j];
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, GemmQ8Kernel, ::testing::Range(0, int(std::size(kKernels))),
                         [](const ::testing::TestParamInfo<int>& i) {
                           std::string s = to_string(kKernels[i.param]);
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

// GemmPrecision::Int8 above kInt8MaxRows: a weight with row groups stays on int8 (the
// dispatched gemm gives ref::gemm_q8's bits, the row-group kernels' order), one without
// them runs f32 (the F32 call's bits).
TEST(GemmQ8, Int8AboveItsRowsNeedsRowGroups) {
  if (!q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  std::mt19937 rng(31);
  const int64_t m = kInt8MaxRows + 38, n = 40, k = 256;
  const TestWeight tw = random_weight(WeightFormat::FP4, n, k, rng);
  const std::vector<float> x = awkward_activations(m, k, 41);
  std::vector<uint8_t> groups(size_t(q8_row_groups_bytes(tw.view())));
  pack_q8_row_groups(tw.view(), groups.data());
  auto run = [&](GemmPrecision prec, bool with_groups, bool reference_q8) {
    std::vector<float> y(size_t(m * n), NAN);
    GemmParams p;
    p.x = x.data();
    p.w = tw.view();
    if (with_groups) p.w.groups = groups.data();
    p.m = m;
    p.precision = prec;
    p.y = y.data();
    if (reference_q8) ref::gemm_q8(p);
    else gemm(p);
    return y;
  };
  const std::vector<float> q8 = run(GemmPrecision::Int8, false, true);
  const std::vector<float> f32 = run(GemmPrecision::F32, false, false);
  EXPECT_EQ(std::memcmp(run(GemmPrecision::Int8, true, false).data(), q8.data(), q8.size() * 4), 0);
  EXPECT_EQ(std::memcmp(run(GemmPrecision::Int8, false, false).data(), f32.data(), f32.size() * 4), 0);
  EXPECT_NE(std::memcmp(q8.data(), f32.data(), f32.size() * 4), 0);  // the two numerics differ
}

// FP4 on int8 changes only x: when every activation block is already a q8_0 block
// (d = amax / 127 a half, x = d · q), the dispatched Int8 GEMM equals the exact F32 one
// (ref::gemm, weights by dequantize_rows) up to summation order.
TEST(GemmQ8, Fp4OnInt8IsExactForActivationsThatAreQ8Blocks) {
  std::mt19937 rng(29);
  const int64_t m = 5, n = 19, k = 256;
  const TestWeight tw = random_weight(WeightFormat::FP4, n, k, rng);
  std::vector<float> x(m * k);
  for (int64_t b = 0; b < m * k / 32; ++b) {
    const float d = f16_decode(f16_encode(0.01f * float(1 + b % 7)));
    for (int i = 0; i < 32; ++i) x[b * 32 + i] = d * float(i == 3 ? 127 : int(rng() % 255) - 127);
  }
  std::vector<float> exact(m * n), int8(m * n);
  GemmParams p;
  p.x = x.data();
  p.w = tw.view();
  p.m = m;
  p.y = exact.data();
  ref::gemm(p);
  p.precision = GemmPrecision::Int8;
  p.y = int8.data();
  gemm(p);
  const std::vector<double> mag = magnitudes(tw, x, m);
  for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(int8[i], exact[i], 1e-5 * mag[i] + 1e-30) << "output " << i;
}

// The dispatched entry: a call mixing a weight the GEMM quantizes x for with an f32 one
// runs each as gemm() would (bit for bit); calls that do not share x, m, ldx or K are
// refused.
TEST(GemmQ8, SharedXEntryMixesFormatsAndChecksItsCalls) {
  std::mt19937 rng(8);
  const int64_t m = 3, k = 96;
  const TestWeight q4 = random_weight(WeightFormat::Q4_0, 20, k, rng);
  std::vector<float> f32(size_t(12 * k));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& v : f32) v = uni(rng);
  const std::vector<float> x = awkward_activations(m, k, 21);
  std::vector<float> want_q(m * 20), want_f(m * 12), got_q(m * 20, NAN), got_f(m * 12, NAN);
  GemmParams pq, pf;
  pq.x = pf.x = x.data();
  pq.m = pf.m = m;
  pq.w = q4.view();
  pf.w = {WeightFormat::F32, 12, k, f32.data(), nullptr};
  pq.y = want_q.data();
  pf.y = want_f.data();
  gemm(pq);
  gemm(pf);
  pq.y = got_q.data();
  pf.y = got_f.data();
  const GemmParams both[] = {pq, pf};
  gemm_shared_x(both);
  EXPECT_EQ(0, std::memcmp(got_q.data(), want_q.data(), got_q.size() * 4));
  EXPECT_EQ(0, std::memcmp(got_f.data(), want_f.data(), got_f.size() * 4));
  GemmParams other_m = pf;
  other_m.m = 2;
  const GemmParams bad_m[] = {pq, other_m};
  EXPECT_THROW(gemm_shared_x(bad_m), Error);
  const std::vector<float> x2 = x;
  GemmParams other_x = pf;
  other_x.x = x2.data();
  const GemmParams bad_x[] = {pq, other_x};
  EXPECT_THROW(gemm_shared_x(bad_x), Error);
}

// A loader's regrouped weight through each path's kernel (AVX-512 VNNI, AVX2), whole and
// as row slices (model::row_slice: one expert of a stacked tensor): a slice starting on a
// group keeps the groups and its y is the reference's on the slice's GGUF rows, bit for
// bit: the row-group kernel at any M (AVX-512 VNNI's decode tiles up to
// kGroupsDecodeMaxRows, its prefill tiles above). A slice starting inside a group reads the GGUF blocks.
class RowGroupsPath : public ::testing::TestWithParam<cpu::QGemmKernel> {
 protected:
  void SetUp() override {
    if (!cpu::q_kernel_supported(GetParam()))
      GTEST_SKIP() << to_string(GetParam()) << ": " << cpu::missing_q_kernel_reason(GetParam());
  }
};

TEST_P(RowGroupsPath, RowGroupsFollowRowSlices) {
  const cpu::QGemmKernel kernel = GetParam();
  std::mt19937 rng(5);
  uint32_t seed = 900;
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::FP4}) {
    const TestWeight tw = random_weight(f, 80, 96, rng);
    std::vector<uint8_t> groups(size_t(q8_row_groups_bytes(tw.view())));
    pack_q8_row_groups(tw.view(), groups.data());
    WeightView whole = tw.view();
    whole.groups = groups.data();
    const std::pair<int64_t, int64_t> slices[] = {{0, 80}, {16, 20}, {32, 48}, {64, 7}, {5, 30}};
    for (const auto& [r0, n] : slices) {
      const WeightView s = model::row_slice(whole, r0, n);
      EXPECT_EQ(s.groups != nullptr, r0 % kGroupRows == 0) << "slice at " << r0;
      if (s.groups == nullptr) continue;
      for (int64_t m : {int64_t{1}, int64_t{3}, cpu::kPackedMinRows + 1, cpu::kGroupsDecodeMaxRows + 1}) {
        SCOPED_TRACE(std::string(to_string(f)) + " rows [" + std::to_string(r0) + ", " +
                     std::to_string(r0 + n) + ") m=" + std::to_string(m));
        const std::vector<float> x = awkward_activations(m, 96, seed++);
        GemmParams p;
        p.x = x.data();
        p.w = s;
        p.m = m;
        std::vector<float> want(size_t(m * n)), got(size_t(m * n), NAN);
        p.y = want.data();
        ref::gemm_q8(p);
        p.y = got.data();
        cpu::gemm_q8(p, kernel);
        for (int64_t i = 0; i < m * n; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << "y[" << i << "] = " << got[i] << ", ref " << want[i];
      }
    }
  }
}

// The walk's tile widths and the thread ranges: at M <= 2 the AVX-512 decode tiles take 4
// groups (64 rows), else 2, so N runs through every edge (1, 2 and 3 groups left, a part
// group); K = 1024 and 2048 make a group longer than the prefetch distance, K = 96 shorter
// (the prefetch then lands several groups on); 1, 2 and 3 threads end their ranges
// mid-tile (the pool splits N by K: at K = 2048 and 4096 into 1-4 groups a chunk), and the
// prefetch stops at each range's end. Above kGroupsDecodeMaxRows the AVX-512 prefill
// tiles (6 rows x 2 groups): M = 65-70 ends on every row remainder (1-5 rows and none),
// and their walk prefetches the next groups up to each range's end. Bit for bit the
// reference.
TEST_P(RowGroupsPath, TileWidthsAndThreadRangesMatchTheReference) {
  const cpu::QGemmKernel kernel = GetParam();
  std::mt19937 rng(7);
  uint32_t seed = 1200;
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::FP4})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{48, 1024}, {71, 96}, {130, 2048}, {200, 96}, {16, 1024}, {100, 4096}}) {
      const TestWeight tw = random_weight(f, n, k, rng);
      std::vector<uint8_t> groups(size_t(q8_row_groups_bytes(tw.view())));
      pack_q8_row_groups(tw.view(), groups.data());
      for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{16}, cpu::kGroupsDecodeMaxRows,
                        cpu::kGroupsDecodeMaxRows + 1, cpu::kGroupsDecodeMaxRows + 2, cpu::kGroupsDecodeMaxRows + 3,
                        cpu::kGroupsDecodeMaxRows + 4, cpu::kGroupsDecodeMaxRows + 5, cpu::kGroupsDecodeMaxRows + 6}) {
        const std::vector<float> x = awkward_activations(m, k, seed++);
        GemmParams p;
        p.x = x.data();
        p.w = tw.view();
        p.m = m;
        std::vector<float> want(size_t(m * n));
        p.y = want.data();
        ref::gemm_q8(p);
        p.w.groups = groups.data();
        for (int threads : {1, 2, 3}) {
          SCOPED_TRACE(std::string(to_string(f)) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m) + " threads=" + std::to_string(threads));
          set_num_threads(threads);
          std::vector<float> got(size_t(m * n), NAN);
          p.y = got.data();
          cpu::gemm_q8(p, kernel);
          for (int64_t i = 0; i < m * n; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                << "y[" << i << "] = " << got[i] << ", ref " << want[i];
        }
        set_num_threads(0);
      }
    }
}

// FP4's row groups keep the UE8M0 codes, which the kernels turn into fp4_int8_scales()'s
// values themselves: every code, the subnormal 2^-127 and 2^-128 (e = 1, 0) and the NaN
// of e = 255 included, gives the reference's bits (NaN where the reference has NaN).
TEST_P(RowGroupsPath, Fp4ScaleCodesAreTheReferencesValues) {
  // Rows r < 240: block b has code 16r + b (mod 255), every finite code many times.
  // Activation row i is nonzero in block i alone, so y(i, r) is one block's product, at
  // code 16r + i: each output checks one code's value. Rows 240..255 hold code 255 (NaN)
  // in one block, which makes the whole row NaN (NaN · 0 is NaN), as in the reference.
  const int64_t blocks = 16, n = 256, k = blocks * 32, m = blocks;
  std::mt19937 rng(8);
  TestWeight tw = random_weight(WeightFormat::FP4, n, k, rng);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < blocks; ++b)
      tw.scale[size_t(r * blocks + b)] = r < 240 ? uint8_t((16 * r + b) % 255) : b == r - 240 ? 255 : 127;
  std::vector<float> x(size_t(m * k), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int j = 0; j < 32; ++j) x[size_t(i * k + i * 32 + j)] = 1.0f - 0.07f * float(j) + 0.25f * float(i % 5);
  std::vector<uint8_t> groups(size_t(q8_row_groups_bytes(tw.view())));
  pack_q8_row_groups(tw.view(), groups.data());
  GemmParams p;
  p.x = x.data();
  p.w = tw.view();
  p.m = m;
  std::vector<float> want(size_t(m * n)), got(size_t(m * n), 0.0f);
  p.y = want.data();
  ref::gemm_q8(p);
  p.w.groups = groups.data();
  p.y = got.data();
  cpu::gemm_q8(p, GetParam());
  int nans = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r) {
      const size_t at = size_t(i * n + r);
      const bool nan_code = r >= 240;
      EXPECT_EQ(bool(std::isnan(want[at])), nan_code) << "ref y(" << i << ", " << r << ")";
      nans += nan_code;
      if (nan_code) EXPECT_TRUE(std::isnan(got[at])) << "y(" << i << ", " << r << ") = " << got[at];
      else EXPECT_EQ(std::bit_cast<uint32_t>(got[at]), std::bit_cast<uint32_t>(want[at]))
          << "y(" << i << ", " << r << ") = " << got[at] << ", ref " << want[at] << ", code " << (16 * r + i) % 255;
    }
  EXPECT_EQ(nans, 16 * 16);
}

INSTANTIATE_TEST_SUITE_P(Paths, RowGroupsPath,
                         ::testing::Values(cpu::QGemmKernel::Avx512Vnni, cpu::QGemmKernel::Avx2),
                         [](const ::testing::TestParamInfo<cpu::QGemmKernel>& i) {
                           std::string s = to_string(i.param);
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

// copy_weight (an expert-parallel rank's own copy of its experts) keeps the row groups
// inside the copy, so the copy runs the original's kernel and gives its bits.
TEST(GemmQ8, ACopyCarriesItsRowGroups) {
  std::mt19937 rng(6);
  const TestWeight tw = random_weight(WeightFormat::Q4_0, 40, 128, rng);
  std::vector<uint8_t> groups(size_t(q8_row_groups_bytes(tw.view())));
  pack_q8_row_groups(tw.view(), groups.data());
  WeightView w = tw.view();
  w.groups = groups.data();
  EXPECT_EQ(copied_bytes(w), copied_bytes(tw.view()) + int64_t(groups.size() + 63) / 64 * 64);
  std::vector<std::byte> buf(size_t(copied_bytes(w)) + 64);
  auto* dst = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) / 64 * 64);
  const WeightView c = copy_weight(w, dst);
  ASSERT_NE(c.groups, nullptr);
  EXPECT_TRUE(reinterpret_cast<const std::byte*>(c.groups) >= dst &&
              reinterpret_cast<const std::byte*>(c.groups) + groups.size() <= dst + copied_bytes(w));
  EXPECT_EQ(std::memcmp(c.groups, groups.data(), groups.size()), 0);
  const std::vector<float> x = awkward_activations(2, 128, 77);
  std::vector<float> a(80), b(80);
  GemmParams p;
  p.x = x.data();
  p.m = 2;
  p.w = w;
  p.y = a.data();
  gemm(p);
  p.w = c;
  p.y = b.data();
  gemm(p);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// The dispatched entry follows the CPU path cap: TROUPE_CPU / ScopedCpuPath; so does
// whether a loader regroups (both SIMD kernels read row groups, the portable one not).
TEST(GemmQ8, DispatchFollowsTheCpuPath) {
  {
    ScopedCpuPath portable(CpuPath::Portable);
    EXPECT_EQ(cpu::best_q_kernel(), cpu::QGemmKernel::Portable);
    EXPECT_FALSE(q8_row_groups_used());
  }
  if (cpu_supports(CpuPath::Avx2)) {
    ScopedCpuPath avx2(CpuPath::Avx2);
    EXPECT_EQ(cpu::best_q_kernel(), cpu::QGemmKernel::Avx2);
    EXPECT_TRUE(q8_row_groups_used());
  }
  if (cpu_supports(CpuPath::Avx512) && cpu_features().avx512vnni) {
    ScopedCpuPath avx512(CpuPath::Avx512);
    EXPECT_EQ(cpu::best_q_kernel(), cpu::QGemmKernel::Avx512Vnni);
    EXPECT_TRUE(q8_row_groups_used());
  }
}

TEST(GemmQ8, ColumnsNotAMultipleOf32AreAnError) {
  std::vector<uint8_t> blocks(34 * 2);
  std::vector<float> x(48), y(1);
  GemmParams p;
  p.x = x.data();
  p.w = {WeightFormat::Q8_0, 1, 48, blocks.data(), nullptr};
  p.y = y.data();
  p.m = 1;
  EXPECT_THROW(gemm(p), Error);
}

}  // namespace
}  // namespace troupe::kernels
