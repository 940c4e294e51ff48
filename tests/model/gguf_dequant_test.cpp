// GGUF number formats bit for bit against the test's own definitions (support/ggml_ref.h):
// every f16 code, random q8_0 / q4_0 blocks, hand-made blocks that pin the nibble order,
// and the writer's quantizers round-tripping through the reader's dequantization.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "model/gguf_dequant.h"
#include "model/gguf_writer.h"
#include "support/ggml_ref.h"

namespace troupe::model {
namespace {

using testing::ref_f16;

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(same_bits(got[i], want[i])) << i << ": " << got[i] << " vs " << want[i];
}

// Blocks of random bytes whose f16 scale is finite (NaN/inf scales make NaN either way).
std::vector<uint8_t> random_blocks(int64_t blocks, int64_t block_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(static_cast<size_t>(blocks * block_bytes));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < blocks; ++i) b[i * block_bytes + 1] &= 0x7B;  // exponent < 31
  return b;
}

std::vector<float> dequant(GgmlType t, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);  // poison
  dequantize_ggml(t, b.data(), n, out.data());
  return out;
}

TEST(GgufDequant, EveryF16CodeMatchesTheDefinition) {
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_TRUE(same_bits(f16_to_f32(uint16_t(h)), ref_f16(uint16_t(h)))) << std::hex << h;
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
}

TEST(GgufDequant, F16EncoderRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive code, and its negative
    ASSERT_EQ(f32_to_f16(ref_f16(uint16_t(h))), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16(-ref_f16(uint16_t(h))), h | 0x8000) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);          // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);      // tie -> even (up)
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);                 // rounds past the largest -> inf
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);             // subnormal tie -> even
}

TEST(GgufDequant, Q8_0IsDTimesQBitForBit) {
  const int64_t n = 32 * 257;
  const auto b = random_blocks(n / 32, 34, 7);
  expect_bits(dequant(GgmlType::Q8_0, b, n), testing::ref_dequant_q8_0(b.data(), n));
}

TEST(GgufDequant, Q4_0IsDTimesNibbleMinus8BitForBit) {
  const int64_t n = 32 * 257;
  const auto b = random_blocks(n / 32, 18, 8);
  expect_bits(dequant(GgmlType::Q4_0, b, n), testing::ref_dequant_q4_0(b.data(), n));
}

// A zero-element tensor (a zero dimension) writes nothing and touches no pointer.
TEST(GgufDequant, NoElementsIsANoOpEvenWithNullBuffers) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::MXFP4})
    EXPECT_NO_THROW(dequantize_ggml(t, nullptr, 0, nullptr));
}

TEST(GgufDequant, Q4_0LowNibblesAreTheFirstHalfOfTheBlock) {
  std::vector<uint8_t> b(18, 0x88);  // every nibble 8 -> 0
  b[0] = 0x00, b[1] = 0x40;          // d = 2.0
  b[2] = 0x1F;                       // element 0: 15 - 8 = 7; element 16: 1 - 8 = -7
  b[17] = 0x0C;                      // element 15: 12 - 8 = 4; element 31: 0 - 8 = -8
  const auto x = dequant(GgmlType::Q4_0, b, 32);
  EXPECT_EQ(x[0], 14.0f);
  EXPECT_EQ(x[16], -14.0f);
  EXPECT_EQ(x[15], 8.0f);
  EXPECT_EQ(x[31], -16.0f);
  EXPECT_EQ(x[1], 0.0f);
}

TEST(GgufDequant, Q8_0BytesAreSignedAfterTheScale) {
  std::vector<uint8_t> b(34, 0);
  b[0] = 0x00, b[1] = 0x38;  // d = 0.5
  b[2] = 0xFF;               // -1
  b[3] = 0x7F;               // 127
  b[33] = 0x80;              // -128
  const auto x = dequant(GgmlType::Q8_0, b, 32);
  EXPECT_EQ(x[0], -0.5f);
  EXPECT_EQ(x[1], 63.5f);
  EXPECT_EQ(x[31], -64.0f);
}

// MXFP4 (ggml's block: e8m0 scale byte, then 16 bytes; byte j holds elements j and j + 16):
// x = E2M1(nibble) * 2^(e - 127). Scales of 255 (NaN in E8M0) are left out.
TEST(GgufDequant, Mxfp4IsE2m1TimesAPowerOfTwoBitForBit) {
  static const double kE2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const int64_t n = 32 * 255;
  auto b = random_blocks(n / 32, 17, 10);
  for (int64_t i = 0; i < n / 32; ++i) b[i * 17] = uint8_t(i);  // every scale 0..254
  std::vector<float> want;
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    const uint8_t* p = b.data() + blk * 17;
    float x[32];
    for (int j = 0; j < 16; ++j)
      for (int half = 0; half < 2; ++half) {
        const int code = half ? p[1 + j] >> 4 : p[1 + j] & 15;
        const double v = std::ldexp(kE2m1[code & 7], int(p[0]) - 127);
        x[j + 16 * half] = float(code & 8 ? -v : v);
      }
    want.insert(want.end(), x, x + 32);
  }
  expect_bits(dequant(GgmlType::MXFP4, b, n), want);
}

TEST(GgufDequant, F16AndBf16TensorsDecodeEachElement) {
  std::vector<uint8_t> b = random_blocks(64, 2, 9);
  const auto f16 = dequant(GgmlType::F16, b, 64);
  const auto bf16 = dequant(GgmlType::BF16, b, 64);
  for (int i = 0; i < 64; ++i) {
    const uint16_t h = testing::ref_u16(b.data() + 2 * i);
    ASSERT_TRUE(same_bits(f16[i], ref_f16(h))) << i;
    ASSERT_TRUE(same_bits(bf16[i], testing::ref_bf16(h))) << i;
  }
}

// The writer's quantizers: what the reader decodes is close to the input: q8_0 within half
// a step (amax / 127); q4_0 within one step (amax / 8: codes reach -8·d but only +7·d, so
// the far side of the block's largest value can lose a whole step, as in llama.cpp).
TEST(GgufDequant, WriterQuantizersStayWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(32 * 64);
  for (float& x : v) x = g(rng);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const auto b = encode_ggml(t, v);
    const auto x = dequant(t, b, int64_t(v.size()));
    for (size_t blk = 0; blk < v.size() / 32; ++blk) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[blk * 32 + i]));
      const float bound = t == GgmlType::Q8_0 ? 0.5f * amax / 127 : amax / 8;
      for (int i = 0; i < 32; ++i)
        ASSERT_LE(std::fabs(x[blk * 32 + i] - v[blk * 32 + i]), bound * 1.01f + 1e-6f)
            << int(t) << " block " << blk << " element " << i;
    }
  }
}

}  // namespace
}  // namespace troupe::model
