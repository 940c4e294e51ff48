// Stored weight formats of MODEL.md §2 (and GGUF's IEEE half): dequantize_rows for the
// unquantized-or-scaled formats and the checkpoint-writer quantizers, against the §3
// definitions in quant_ref.h (IEEE half: its definition written out below).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "kernels/check.h"
#include "kernels/quant.h"
#include "kernels/weights.h"
#include "tests/kernels/quant_ref.h"

namespace troupe::kernels {
namespace {

using namespace quant_ref;

// --- dequantize_rows ----------------------------------------------------------------------

struct StoredWeight {
  WeightFormat format;
  int64_t rows, cols;
  std::vector<uint8_t> data;   // raw bytes in the §2 layout
  std::vector<uint8_t> scale;  // UE8M0 codes

  WeightView view() const {
    return {format, rows, cols, data.data(), scale.empty() ? nullptr : scale.data()};
  }
  int64_t scale_index(int64_t r, int64_t c) const {
    if (format == WeightFormat::FP8) return (r / 32) * ((cols + 31) / 32) + c / 32;
    return r * (cols / 32) + c / 32;
  }
  // Element value from the §3 definition, computed in double (exact).
  double value(int64_t r, int64_t c) const {
    const int64_t k = r * cols + c;
    switch (format) {
      case WeightFormat::F32:
        return reinterpret_cast<const float*>(data.data())[k];
      case WeightFormat::BF16:
        return std::bit_cast<float>(static_cast<uint32_t>(data[2 * k] | data[2 * k + 1] << 8)
                                    << 16);
      case WeightFormat::F16: {  // IEEE 754 binary16: bias 15, 10 fraction bits
        const int h = data[2 * k] | data[2 * k + 1] << 8, e = (h >> 10) & 31, f = h & 1023;
        const double sign = (h & 0x8000) ? -1 : 1;
        if (e == 31) return f ? std::nan("") : sign * INFINITY;
        return sign * (e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25));
      }
      case WeightFormat::FP8:
      case WeightFormat::ROWFP8: {
        const int code = data[k];
        if ((code & 0x7F) == 0x7F) return std::nan("");
        const double v = ref_e4m3_magnitude(code & 0x7F) * ((code & 0x80) ? -1 : 1);
        return std::ldexp(v, scale[scale_index(r, c)] - 127);
      }
      case WeightFormat::FP4: {
        const int code = (c % 2 == 0) ? data[k / 2] & 0xF : data[k / 2] >> 4;
        const double v = ref_e2m1_magnitude(code & 7) * ((code & 8) ? -1 : 1);
        return std::ldexp(v, scale[scale_index(r, c)] - 127);
      }
      case WeightFormat::Q8_0:
      case WeightFormat::Q4_0:  // GGUF blocks: their own test (tests/kernels/gemm_q8_test.cpp)
        ADD_FAILURE() << "value(): no " << to_string(format) << " weights here";
        return 0;
    }
    return 0;
  }
};

int64_t data_bytes(WeightFormat f, int64_t rows, int64_t cols) {
  switch (f) {
    case WeightFormat::F32:
      return rows * cols * 4;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      return rows * cols * 2;
    case WeightFormat::FP4:
      return rows * cols / 2;
    default:
      return rows * cols;
  }
}

int64_t scale_count(WeightFormat f, int64_t rows, int64_t cols) {
  if (f == WeightFormat::FP8) return ((rows + 31) / 32) * ((cols + 31) / 32);
  if (f == WeightFormat::FP4 || f == WeightFormat::ROWFP8) return rows * cols / 32;
  return 0;
}

StoredWeight random_stored(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  StoredWeight w{f, rows, cols, std::vector<uint8_t>(data_bytes(f, rows, cols)),
                 std::vector<uint8_t>(scale_count(f, rows, cols))};
  for (uint8_t& b : w.data) b = static_cast<uint8_t>(rng());
  if (f == WeightFormat::F32) {  // keep F32 bytes finite so the copy check is simple
    float* p = reinterpret_cast<float*>(w.data.data());
    for (int64_t i = 0; i < rows * cols; ++i) p[i] = std::normal_distribution<float>()(rng);
  }
  for (uint8_t& s : w.scale) s = static_cast<uint8_t>(rng() % 255);  // 0 (subnormal) .. 254
  return w;
}

void expect_dequant_matches(const StoredWeight& w, int64_t r0, int64_t n) {
  std::vector<float> out(n * w.cols + 1, -12345.0f);
  dequantize_rows(w.view(), r0, n, out.data());
  EXPECT_EQ(out.back(), -12345.0f) << to_string(w.format) << ": wrote past out";
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < w.cols; ++c) {
      const double want = w.value(r0 + i, c);
      const float got = out[i * w.cols + c];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << to_string(w.format) << " r=" << r0 + i << " c=" << c;
      } else {
        // Products of <= 4 significant bits are exact in f32 down to 2^-136; the only
        // rounding left is overflow past FLT_MAX to ±Inf, which the cast reproduces.
        ASSERT_TRUE(same_bits(got, static_cast<float>(want)))
            << to_string(w.format) << " [" << w.rows << "x" << w.cols << "] r=" << r0 + i
            << " c=" << c;
      }
    }
  }
}

// e4m3_nan_free, the loader's check behind WeightView::no_nan_codes: both NaN codes at
// the first, middle and last byte and on each side of the scan's 64 KiB steps, and the
// codes that only look like them (0x7E, 0xFE, 0x80) left alone.
TEST(WeightFormat, E4m3NanFreeFindsEveryNanCode) {
  EXPECT_TRUE(e4m3_nan_free(nullptr, 0));
  for (int64_t n : {1, 33, 65536, 2 * 65536 + 5}) {
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t c = static_cast<uint8_t>(i * 7);
      codes[i] = (c & 0x7F) == 0x7F ? static_cast<uint8_t>(c - 1) : c;
    }
    codes[0] = 0x7E;
    codes[n - 1] = n > 1 ? 0xFE : 0x80;
    EXPECT_TRUE(e4m3_nan_free(codes.data(), n)) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1, std::min<int64_t>(n - 1, 65535),
                       std::min<int64_t>(n - 1, 65536)})
      for (uint8_t nan : {uint8_t{0x7F}, uint8_t{0xFF}}) {
        std::vector<uint8_t> with = codes;
        with[at] = nan;
        EXPECT_FALSE(e4m3_nan_free(with.data(), n)) << n << " at " << at << " code " << int{nan};
      }
  }
}

TEST(WeightDequant, AllFormatsAndRowRanges) {
  struct Case {
    WeightFormat f;
    int64_t rows, cols;
  };
  const Case cases[] = {
      {WeightFormat::F32, 3, 17},  {WeightFormat::BF16, 5, 33},   {WeightFormat::F16, 4, 1000},
      {WeightFormat::F16, 1, 1},   {WeightFormat::F16, 7, 45},    {WeightFormat::FP8, 1, 1},
      {WeightFormat::FP8, 33, 47}, {WeightFormat::FP8, 70, 96},   {WeightFormat::FP4, 3, 32},
      {WeightFormat::FP4, 17, 96}, {WeightFormat::ROWFP8, 1, 32}, {WeightFormat::ROWFP8, 33, 64},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const StoredWeight w = random_stored(c.f, c.rows, c.cols, seed++);
    expect_dequant_matches(w, 0, c.rows);
    expect_dequant_matches(w, c.rows - 1, 1);
    expect_dequant_matches(w, c.rows / 2, c.rows - c.rows / 2);
    expect_dequant_matches(w, 0, 0);
  }
}

TEST(WeightDequant, HandWorkedValues) {
  // FP8 [2, 2]: one tile, scale 2^-1. FP4 [1, 32]: byte 0 = code 1 | code 0xE << 4.
  StoredWeight fp8{WeightFormat::FP8, 2, 2, {0x38, 0xB8, 0x7E, 0x01}, {126}};
  std::vector<float> out(4);
  dequantize_rows(fp8.view(), 0, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.5f, -0.5f, 224.0f, 0x1p-10f}));
  StoredWeight fp4{WeightFormat::FP4, 1, 32, std::vector<uint8_t>(16, 0), {128}};
  fp4.data[0] = 0xE1;
  out.assign(32, kNaN);
  dequantize_rows(fp4.view(), 0, 1, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -8.0f);
  EXPECT_TRUE(same_bits(out[2], 0.0f));
  StoredWeight bf{WeightFormat::BF16, 1, 2, {0x80, 0x3F, 0x00, 0xC0}, {}};
  dequantize_rows(bf.view(), 0, 1, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  // F16 [1, 6]: 1, -2, 65504 (max finite), 2^-24 (smallest subnormal), -0, -inf.
  StoredWeight half{WeightFormat::F16, 1, 6, {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00,
                                              0x00, 0x80, 0x00, 0xFC}, {}};
  dequantize_rows(half.view(), 0, 1, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);
  EXPECT_EQ(out[3], 0x1p-24f);
  EXPECT_TRUE(same_bits(out[4], -0.0f));
  EXPECT_EQ(out[5], -INFINITY);
  EXPECT_STREQ(to_string(WeightFormat::F16), "F16");
}

TEST(WeightDequant, RejectsBadArguments) {
  const StoredWeight w = random_stored(WeightFormat::FP8, 4, 40, 9);
  std::vector<float> out(4 * 40);
  EXPECT_THROW(dequantize_rows(w.view(), 3, 2, out.data()), Error);
  EXPECT_THROW(dequantize_rows(w.view(), -1, 1, out.data()), Error);
  EXPECT_THROW(dequantize_rows(w.view(), 0, 1, nullptr), Error);
  WeightView no_scale = w.view();
  no_scale.scale = nullptr;
  EXPECT_THROW(dequantize_rows(no_scale, 0, 1, out.data()), Error);
  WeightView ragged_fp4 = w.view();
  ragged_fp4.format = WeightFormat::FP4;
  EXPECT_THROW(dequantize_rows(ragged_fp4, 0, 1, out.data()), Error);
  WeightView no_data = w.view();
  no_data.data = nullptr;
  EXPECT_THROW(dequantize_rows(no_data, 0, 1, out.data()), Error);
  EXPECT_STREQ(to_string(WeightFormat::ROWFP8), "ROWFP8");
}

// Random weights whose magnitude changes from row to row, with one all-zero region.
std::vector<float> random_weight(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 30) - 20);
    for (int64_t c = 0; c < cols; ++c)
      w[r * cols + c] = (r < 2 && c < 32) ? 0.0f : normal(rng) * mag;
  }
  return w;
}

void expect_weight_quant_matches(WeightFormat f, int64_t rows, int64_t cols) {
  const std::vector<float> w = random_weight(rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
  StoredWeight sw{f, rows, cols, std::vector<uint8_t>(data_bytes(f, rows, cols) + 1, 0xAB),
                  std::vector<uint8_t>(scale_count(f, rows, cols) + 1, 0xAB)};
  if (f == WeightFormat::FP8)
    quantize_weight_fp8(w.data(), rows, cols, sw.data.data(), sw.scale.data());
  if (f == WeightFormat::FP4)
    quantize_weight_fp4(w.data(), rows, cols, sw.data.data(), sw.scale.data());
  if (f == WeightFormat::ROWFP8) {
    quantize_weight_rowfp8(w.data(), rows, cols, sw.data.data(), sw.scale.data());
  }
  EXPECT_EQ(sw.data.back(), 0xAB) << to_string(f) << ": wrote past q";
  EXPECT_EQ(sw.scale.back(), 0xAB) << to_string(f) << ": wrote past scale";
  const bool fp4 = f == WeightFormat::FP4;
  const float qmax = fp4 ? 6.0f : 448.0f;
  // Block amax from the §2 rule: 32x32 tiles for FP8, 32 columns of a row otherwise.
  std::vector<float> amax(scale_count(f, rows, cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& a = amax[sw.scale_index(r, c)];
      a = std::max(a, std::fabs(w[r * cols + c]));
    }
  }
  for (size_t b = 0; b < amax.size(); ++b) {
    ASSERT_EQ(sw.scale[b], ref_pow2ceil_code(std::max(amax[b], 0x1p-100f) / qmax))
        << to_string(f) << " [" << rows << "x" << cols << "] block " << b;
  }
  std::vector<float> deq(rows * cols);
  dequantize_rows(sw.view(), 0, rows, deq.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float s = ref_scale(sw.scale[sw.scale_index(r, c)]);
      const float y = w[r * cols + c] / s;
      const float want = (fp4 ? e2m1_decode(ref_e2m1(y)) : e4m3_decode(ref_e4m3(y))) * s;
      ASSERT_TRUE(same_bits(deq[r * cols + c], want))
          << to_string(f) << " [" << rows << "x" << cols << "] r=" << r << " c=" << c;
    }
  }
}

TEST(WeightQuantize, Fp8RaggedTiles) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {3, 17},
                            {31, 33},
                            {33, 31},
                            {32, 32},
                            {65, 97},
                            {64, 64}}) {
    expect_weight_quant_matches(WeightFormat::FP8, rows, cols);
  }
}

TEST(WeightQuantize, Fp4AndRowFp8) {
  for (WeightFormat f : {WeightFormat::FP4, WeightFormat::ROWFP8}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {3, 64}, {17, 96}, {33, 32}}) {
      expect_weight_quant_matches(f, rows, cols);
    }
  }
}

TEST(WeightQuantize, ZeroMatrixScalesAndBadShapes) {
  std::vector<float> w(64, 0.0f);
  std::vector<uint8_t> q(64), s(2);
  quantize_weight_fp8(w.data(), 2, 32, q.data(), s.data());
  EXPECT_EQ(s[0], 19);  // pow2ceil(2^-100 / 448) = 2^-108
  quantize_weight_fp4(w.data(), 2, 32, q.data(), s.data());
  EXPECT_EQ(s[0], 25);  // pow2ceil(2^-100 / 6) = 2^-102
  quantize_weight_rowfp8(w.data(), 2, 32, q.data(), s.data());
  EXPECT_EQ(s[1], 19);
  EXPECT_THROW(quantize_weight_fp4(w.data(), 2, 16, q.data(), s.data()), Error);
  EXPECT_THROW(quantize_weight_rowfp8(w.data(), 1, 48, q.data(), s.data()), Error);
  EXPECT_THROW(quantize_weight_fp8(w.data(), -1, 4, q.data(), s.data()), Error);
}

}  // namespace
}  // namespace troupe::kernels
