// MODEL.md §3 number formats and activation quantizers, checked against hand-worked
// values and an independent brute-force reference (quant_ref.h: nearest grid value by
// search over all codes, in double, with the grid rebuilt from the format definition).
#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "tests/kernels/quant_ref.h"

namespace troupe::kernels {
namespace {

using namespace quant_ref;

// Random f32 values over many binades plus grid midpoints and their neighbours.
std::vector<float> awkward_values(uint32_t seed, int n, float max_mag) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f), expo(-24.0f, std::log2(max_mag));
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    const float sign = (rng() & 1) ? -1.0f : 1.0f;
    v.push_back(sign * std::ldexp(mant(rng), static_cast<int>(std::floor(expo(rng)))));
    v.push_back(sign * std::uniform_real_distribution<float>(0.0f, max_mag)(rng));
  }
  return v;
}

std::vector<float> midpoints(int n_codes, double (*grid)(int)) {
  std::vector<float> v;
  for (int c = 0; c + 1 < n_codes; ++c) {
    const float mid = static_cast<float>((grid(c) + grid(c + 1)) / 2);
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      v.push_back(m);
      v.push_back(-m);
    }
  }
  return v;
}

// --- E2M1 ------------------------------------------------------------------------------

TEST(QuantE2m1, DecodesAllSixteenCodes) {
  const float expect[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_TRUE(same_bits(e2m1_decode(c), expect[c])) << "code " << c;
    EXPECT_TRUE(same_bits(e2m1_table()[c], expect[c])) << "code " << c;
    EXPECT_EQ(e2m1_encode(expect[c]), c);
  }
  EXPECT_EQ(e2m1_decode(0xF3), 1.5f);  // only the low nibble counts
}

TEST(QuantE2m1, EncodeTiesAndSpecials) {
  struct Case {
    float x;
    uint8_t code;
  };
  const Case cases[] = {
      {0.25f, 0},  {0.75f, 2},   {1.25f, 2},   {1.75f, 4},   {2.5f, 4},    {3.5f, 6},  {5.0f, 6},
      {-5.0f, 14}, {0.2499f, 0}, {0.2501f, 1}, {4.999f, 6},  {5.001f, 7},  {6.0f, 7},  {7.0f, 7},
      {1e30f, 7},  {kInf, 7},    {-kInf, 15},  {kNaN, 0},    {-kNaN, 8},   {-0.0f, 8}, {-0.1f, 8},
      {0.1f, 0},   {-2.5f, 12},  {2.75f, 5},   {FLT_MIN, 0}, {-1e-45f, 8},
  };
  for (const Case& c : cases) EXPECT_EQ(e2m1_encode(c.x), c.code) << "x=" << c.x;
}

TEST(QuantE2m1, RandomValuesRoundToNearestGridPoint) {
  std::vector<float> xs = awkward_values(11, 4000, 8.0f);
  for (float m : midpoints(8, ref_e2m1_magnitude)) xs.push_back(m);
  for (float x : xs) ASSERT_EQ(e2m1_encode(x), ref_e2m1(x)) << "x=" << x;
}

// --- E4M3 ------------------------------------------------------------------------------

TEST(QuantE4m3, AllCodesDecodeAndReencode) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_decode(c);
    EXPECT_TRUE(same_bits(v, e4m3_table()[c])) << "code " << c;
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    const double mag = ref_e4m3_magnitude(c & 0x7F);
    EXPECT_EQ(static_cast<double>(v), (c & 0x80) ? -mag : mag) << "code " << c;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << "code " << c;
    EXPECT_EQ(e4m3_encode(v), c) << "code " << c;
  }
  for (int c = 1; c < 0x7F; ++c) EXPECT_LT(e4m3_decode(c - 1), e4m3_decode(c));
}

TEST(QuantE4m3, EdgeValues) {
  struct Case {
    float x;
    uint8_t code;
  };
  const Case cases[] = {
      {448.0f, 0x7E},
      {464.0f, 0x7E},
      {449.0f, 0x7E},
      {1e30f, 0x7E},
      {kInf, 0x7E},
      {-kInf, 0xFE},
      {-464.0f, 0xFE},
      {432.0f, 0x7E},
      {431.99f, 0x7D},
      {416.0f, 0x7D},
      {240.0f, 0x77},
      {248.0f, 0x78},
      {1.0f, 0x38},
      {1.0625f, 0x38},
      {1.1875f, 0x3A},
      {0x1p-9f, 0x01},
      {0x1p-10f, 0x00},
      {3 * 0x1p-10f, 0x02},
      {5 * 0x1p-10f, 0x02},
      {0x1p-6f, 0x08},
      {0x1p-6f + 0x1p-10f, 0x08},
      {0x1p-6f + 3 * 0x1p-10f, 0x0A},
      {15 * 0x1p-10f, 0x08},
      {7 * 0x1p-9f, 0x07},
      {kNaN, 0x7F},
      {-kNaN, 0xFF},
      {-0.0f, 0x80},
      {0.0f, 0x00},
      {-1e-10f, 0x80},
      {-0x1p-10f, 0x80},
      {1e-45f, 0x00},
      {-0.3f, 0xAA},
  };
  for (const Case& c : cases) EXPECT_EQ(e4m3_encode(c.x), c.code) << "x=" << c.x;
}

TEST(QuantE4m3, RandomValuesRoundToNearestGridPoint) {
  std::vector<float> xs = awkward_values(12, 4000, 600.0f);
  for (float m : midpoints(0x7F, ref_e4m3_magnitude)) xs.push_back(m);
  std::mt19937 rng(13);
  for (int i = 0; i < 20000; ++i) {  // arbitrary bit patterns, NaN included
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
  for (float x : xs) ASSERT_EQ(e4m3_encode(x), ref_e4m3(x)) << "x=" << x;
}

// --- UE8M0, pow2ceil, BF16 --------------------------------------------------------------

TEST(QuantUe8m0, Decode) {
  EXPECT_EQ(ue8m0_decode(127), 1.0f);
  EXPECT_EQ(ue8m0_decode(128), 2.0f);
  EXPECT_EQ(ue8m0_decode(105), 0x1p-22f);
  EXPECT_EQ(ue8m0_decode(1), 0x1p-126f);
  EXPECT_EQ(ue8m0_decode(0), 0x1p-127f);  // subnormal, not flushed
  EXPECT_EQ(std::fpclassify(ue8m0_decode(0)), FP_SUBNORMAL);
  EXPECT_EQ(ue8m0_decode(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(ue8m0_decode(255)));
  for (int c = 0; c < 255; ++c) EXPECT_EQ(ue8m0_decode(c), std::ldexp(1.0f, c - 127)) << c;
}

TEST(QuantUe8m0, Pow2Ceil) {
  EXPECT_EQ(pow2ceil_ue8m0(1.0f), 127);
  EXPECT_EQ(pow2ceil_ue8m0(std::nextafter(1.0f, 2.0f)), 128);
  EXPECT_EQ(pow2ceil_ue8m0(std::nextafter(1.0f, 0.0f)), 127);
  EXPECT_EQ(pow2ceil_ue8m0(0.75f), 127);
  EXPECT_EQ(pow2ceil_ue8m0(449.0f / 448.0f), 128);
  EXPECT_EQ(pow2ceil_ue8m0(0x1p-126f), 1);
  EXPECT_EQ(pow2ceil_ue8m0(1e-4f / 448.0f), 105);
  EXPECT_EQ(pow2ceil_ue8m0(0x1p127f), 254);
  EXPECT_EQ(pow2ceil_ue8m0(kInf), 255);
  EXPECT_THROW(pow2ceil_ue8m0(0.0f), Error);
  EXPECT_THROW(pow2ceil_ue8m0(-1.0f), Error);
  EXPECT_THROW(pow2ceil_ue8m0(0x1p-127f), Error);
  std::mt19937 rng(14);
  for (int i = 0; i < 10000; ++i) {
    const float v = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                               static_cast<int>(rng() % 250) - 126);
    ASSERT_EQ(pow2ceil_ue8m0(v), ref_pow2ceil_code(v)) << v;
  }
}

TEST(QuantBf16, RoundNearestEvenAndSpecials) {
  EXPECT_EQ(bf16_encode(1.0f), 0x3F80);
  EXPECT_EQ(bf16_encode(1.0f + 0x1p-8f), 0x3F80);      // tie, even stays
  EXPECT_EQ(bf16_encode(1.0f + 3 * 0x1p-8f), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(bf16_encode(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(bf16_encode(-0.0f), 0x8000);
  EXPECT_EQ(bf16_encode(kInf), 0x7F80);
  EXPECT_EQ(bf16_encode(-kInf), 0xFF80);
  EXPECT_EQ(bf16_encode(FLT_MAX), 0x7F80);    // RNE overflows to Inf
  EXPECT_EQ(bf16_encode(0x1p-133f), 0x0001);  // bf16 subnormal
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t b = bf16_encode(std::bit_cast<float>(nan));
    EXPECT_TRUE(std::isnan(bf16_decode(b))) << std::hex << nan;
    EXPECT_EQ(b & 0x0040, 0x0040) << "quiet bit, " << std::hex << nan;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << "sign, " << std::hex << nan;
  }
  EXPECT_EQ(std::bit_cast<uint32_t>(bf16_decode(0x3F81)), 0x3F810000u);
  std::mt19937 rng(15);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isfinite(x) || std::fabs(x) >= 0x1.fep127f) continue;
    const uint16_t lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
    const double dlo = std::fabs(x - static_cast<double>(bf16_decode(lo)));
    const double dhi = std::fabs(x - static_cast<double>(bf16_decode(lo + 1)));
    const uint16_t expect = (dlo < dhi || (dlo == dhi && lo % 2 == 0)) ? lo : lo + 1;
    ASSERT_EQ(bf16_encode(x), expect) << x;
  }
}

// --- activation / cache quantizers --------------------------------------------------------

// One quantizer of §3 with its block geometry and independent reference rules.
struct ActQuant {
  const char* name;
  int block;
  int bytes_per_block;  // code bytes
  void (*quantize)(const float*, int64_t, uint8_t*, uint8_t*);
  void (*dequantize)(const uint8_t*, const uint8_t*, int64_t, float*);
  void (*fake)(float*, int64_t);
};

const ActQuant kActQuants[] = {
    {"fp8_ue8m0", 32, 32, quantize_fp8_ue8m0, dequantize_fp8_ue8m0, fake_quant_fp8_ue8m0},
    {"nvfp4", 16, 8, quantize_nvfp4, dequantize_nvfp4, fake_quant_nvfp4},
    {"mxfp4", 32, 16, quantize_mxfp4, dequantize_mxfp4, fake_quant_mxfp4},
};

float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Expected dequantized block under §3, written from the spec text.
std::vector<float> ref_act_block(const ActQuant& aq, const float* x) {
  const float amax = block_amax(x, aq.block);
  std::vector<float> out(aq.block);
  const std::string name = aq.name;
  float s = 0.0f;
  if (name == "fp8_ue8m0") s = ref_scale(ref_pow2ceil_code(std::max(amax, 1e-4f) / 448.0f));
  if (name == "mxfp4") s = ref_scale(ref_pow2ceil_code(std::max(amax, 6.0f * 0x1p-126f) / 6.0f));
  if (name == "nvfp4") s = e4m3_decode(ref_e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
  for (int i = 0; i < aq.block; ++i) {
    const float y = x[i] / s;
    out[i] = (name == "fp8_ue8m0" ? e4m3_decode(ref_e4m3(y)) : e2m1_decode(ref_e2m1(y))) * s;
  }
  return out;
}

// Blocks with amax spread over many binades, some all-zero, some with -0.0.
std::vector<float> random_blocks(uint32_t seed, int64_t n, int block) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t b = 0; b < n; b += block) {
    const int kind = static_cast<int>(rng() % 8);
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 25);
    for (int i = 0; i < block; ++i) {
      x[b + i] = kind == 0 ? 0.0f : kind == 1 ? -0.0f : normal(rng) * mag;
    }
  }
  return x;
}

TEST(QuantActivation, CheckVectors) {
  std::vector<float> zero(32, 0.0f), out(32);
  std::vector<uint8_t> q(32), s(2);
  quantize_fp8_ue8m0(zero.data(), 32, q.data(), s.data());
  EXPECT_EQ(s[0], 105);
  quantize_nvfp4(zero.data(), 32, q.data(), s.data());
  EXPECT_EQ(s[0], 0x01);
  EXPECT_EQ(s[1], 0x01);
  quantize_mxfp4(zero.data(), 32, q.data(), s.data());
  EXPECT_EQ(s[0], 1);

  std::vector<float> x(32, 0.25f);
  x[5] = 449.0f;
  quantize_fp8_ue8m0(x.data(), 32, q.data(), s.data());
  dequantize_fp8_ue8m0(q.data(), s.data(), 32, out.data());
  EXPECT_EQ(s[0], 128);
  EXPECT_EQ(out[5], 448.0f);
  EXPECT_EQ(out[0], 0.25f);

  x.assign(32, 0.0f);
  x[7] = 7.0f;
  x[8] = -3.0f;
  quantize_mxfp4(x.data(), 32, q.data(), s.data());
  dequantize_mxfp4(q.data(), s.data(), 32, out.data());
  EXPECT_EQ(s[0], 128);
  EXPECT_EQ(out[7], 8.0f);       // 3.5 ties to 4
  EXPECT_EQ(out[8], -3.0f);      // -1.5 exact
  EXPECT_EQ(q[3] >> 4, 6);       // channel 7: high nibble of byte 3
  EXPECT_EQ(q[4] & 0xF, 8 + 3);  // channel 8: low nibble of byte 4

  quantize_nvfp4(x.data(), 32, q.data(), s.data());
  dequantize_nvfp4(q.data(), s.data(), 32, out.data());
  EXPECT_EQ(e4m3_decode(s[0]), 1.125f);  // 7/6 rounds down; not rounded up
  EXPECT_EQ(out[7], 6.75f);
}

TEST(QuantActivation, MatchesSpecOnRandomBlocks) {
  for (const ActQuant& aq : kActQuants) {
    for (int64_t blocks : {0, 1, 2, 3, 17, 31}) {
      const int64_t n = blocks * aq.block;
      const std::vector<float> x = random_blocks(static_cast<uint32_t>(100 + n), n, aq.block);
      std::vector<uint8_t> q(blocks * aq.bytes_per_block + 1, 0xAB), s(blocks + 1, 0xAB);
      std::vector<float> out(n + 1, kNaN);
      aq.quantize(x.data(), n, q.data(), s.data());
      aq.dequantize(q.data(), s.data(), n, out.data());
      EXPECT_EQ(q.back(), 0xAB) << aq.name << ": wrote past the codes";
      EXPECT_EQ(s.back(), 0xAB) << aq.name << ": wrote past the scales";
      EXPECT_TRUE(std::isnan(out.back())) << aq.name << ": wrote past the output";
      std::vector<float> fake(x.begin(), x.end());
      aq.fake(fake.data(), n);
      for (int64_t b = 0; b < blocks; ++b) {
        const std::vector<float> expect = ref_act_block(aq, x.data() + b * aq.block);
        for (int i = 0; i < aq.block; ++i) {
          const int64_t k = b * aq.block + i;
          ASSERT_TRUE(same_bits(out[k], expect[i]))
              << aq.name << " n=" << n << " k=" << k << " x=" << x[k] << " got " << out[k]
              << " want " << expect[i];
          ASSERT_TRUE(same_bits(fake[k], out[k])) << aq.name << " fake k=" << k;
        }
      }
    }
  }
}

TEST(QuantActivation, RejectsRaggedLengths) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> q(64), s(4);
  EXPECT_THROW(quantize_fp8_ue8m0(x.data(), 33, q.data(), s.data()), Error);
  EXPECT_THROW(quantize_nvfp4(x.data(), 17, q.data(), s.data()), Error);
  EXPECT_THROW(quantize_mxfp4(x.data(), 16, q.data(), s.data()), Error);
  EXPECT_THROW(fake_quant_mxfp4(x.data(), 31), Error);
  EXPECT_THROW(quantize_fp8_ue8m0(nullptr, 32, q.data(), s.data()), Error);
}

TEST(QuantActivation, NonFiniteInputs) {
  std::vector<float> x(32, 1.0f), out(32);
  std::vector<uint8_t> q(32), s(1);
  x[3] = kNaN;
  quantize_fp8_ue8m0(x.data(), 32, q.data(), s.data());
  dequantize_fp8_ue8m0(q.data(), s.data(), 32, out.data());
  EXPECT_EQ(q[3] & 0x7F, 0x7F);  // NaN stays NaN, the rest of the block is unaffected
  EXPECT_EQ(s[0], ref_pow2ceil_code(1.0f / 448.0f));
  EXPECT_EQ(out[0], 1.0f);
  quantize_mxfp4(x.data(), 32, q.data(), s.data());
  EXPECT_EQ((q[1] >> 4) & 0x7, 0);  // channel 3; E2M1 has no NaN: code 0 | sign
}

}  // namespace
}  // namespace troupe::kernels
