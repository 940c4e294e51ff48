// The CUDA backend's host-side pieces, checked on any machine (no GPU needed): the
// device-side format decoders (kernels/cuda/formats.h, compiled here as host code)
// against kernels/quant.h for every code, the GEMM launch plan, and how Backend::Cuda
// fails without a device. The kernels themselves are checked by troupe_cuda_check
// (tests/cuda) on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/cuda/device_context.h"
#include "kernels/cuda/formats.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/exec_context.h"
#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"
#include "kernels/quant.h"

namespace troupe::kernels {
namespace {

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(CudaFormats, EveryCodeDecodesAsTheReference) {
  for (int c = 0; c < 256; ++c) {
    EXPECT_TRUE(same(cuda::e4m3_value(uint8_t(c)), e4m3_decode(uint8_t(c)))) << "e4m3 " << c;
    EXPECT_TRUE(same(cuda::ue8m0_value(uint8_t(c)), ue8m0_decode(uint8_t(c)))) << "ue8m0 " << c;
  }
  for (int c = 0; c < 16; ++c)
    EXPECT_TRUE(same(cuda::e2m1_value(uint8_t(c)), e2m1_decode(uint8_t(c)))) << "e2m1 " << c;
  for (uint32_t b = 0; b < 65536; b += 7)
    EXPECT_TRUE(same(cuda::bf16_value(uint16_t(b)), bf16_decode(uint16_t(b)))) << "bf16 " << b;
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_TRUE(same(cuda::f16_value(uint16_t(h)), f16_decode(uint16_t(h)))) << "f16 " << h;
}

TEST(CudaFormats, Bf16RoundingMatchesTheEncoder) {
  std::mt19937 rng(3);
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, 0x1.00800p0f,
                           0x1.01800p0f, 3.4e38f, 1e-40f, -1e-40f};
  for (int i = 0; i < 100000; ++i) xs.push_back(std::bit_cast<float>(uint32_t(rng())));
  for (float x : xs)
    EXPECT_TRUE(same(cuda::round_to_bf16(x), bf16_decode(bf16_encode(x)))) << std::hexfloat << x;
}

// weight_at (the device kernels' element access) equals dequantize_rows for every format.
TEST(CudaFormats, WeightAtMatchesDequantizeRows) {
  const int64_t rows = 40, cols = 96;  // two FP8 tile rows, three scale blocks
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 0.1f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = d(rng);
  std::vector<uint8_t> q(rows * cols), s(rows * cols);
  std::vector<uint16_t> b(rows * cols), h(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) b[i] = bf16_encode(w[i]);
  for (size_t i = 0; i < w.size(); ++i) h[i] = f16_encode(w[i]);
  const auto check = [&](WeightView v) {
    std::vector<float> want(rows * cols);
    dequantize_rows(v, 0, rows, want.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_TRUE(same(cuda::weight_at(v, r, c), want[r * cols + c]))
            << to_string(v.format) << " [" << r << "][" << c << "]";
  };
  check({WeightFormat::F32, rows, cols, w.data(), nullptr});
  check({WeightFormat::BF16, rows, cols, b.data(), nullptr});
  check({WeightFormat::F16, rows, cols, h.data(), nullptr});
  quantize_weight_fp8(w.data(), rows, cols, q.data(), s.data());
  check({WeightFormat::FP8, rows, cols, q.data(), s.data()});
  quantize_weight_rowfp8(w.data(), rows, cols, q.data(), s.data());
  check({WeightFormat::ROWFP8, rows, cols, q.data(), s.data()});
  quantize_weight_fp4(w.data(), rows, cols, q.data(), s.data());
  check({WeightFormat::FP4, rows, cols, q.data(), s.data()});
}

TEST(CudaGemmPlan, PicksKernelRowsAndGrid) {
  struct Row {
    int64_t m, n, k;
    WeightFormat f;
    bool aligned;
    cuda::GemmKernel kernel;
    int m_rows;
    bool vector;
    unsigned grid_x, grid_y;
  };
  using K = cuda::GemmKernel;
  const Row table[] = {
      {1, 4096, 7168, WeightFormat::FP8, true, K::Decode, 1, true, 512, 1},
      {3, 4096, 7168, WeightFormat::FP4, true, K::Decode, 4, true, 512, 1},
      {8, 9, 64, WeightFormat::ROWFP8, true, K::Decode, 8, true, 2, 1},
      {5, 9, 45, WeightFormat::FP8, true, K::Decode, 8, false, 2, 1},   // ragged K
      {2, 9, 64, WeightFormat::FP4, false, K::Decode, 2, false, 2, 1},  // unaligned data
      {1, 9, 64, WeightFormat::BF16, true, K::Decode, 1, false, 2, 1},  // element path
      {9, 130, 96, WeightFormat::FP8, true, K::Tiled, 1, false, 3, 1},
      {64, 4096, 7168, WeightFormat::FP4, true, K::Tiled, 1, false, 64, 1},
      {4097, 64, 32, WeightFormat::F32, true, K::Tiled, 1, false, 1, 65},
  };
  for (const Row& r : table) {
    const cuda::GemmPlan p = cuda::plan_gemm(r.m, r.n, r.k, r.f, r.aligned);
    SCOPED_TRACE("m=" + std::to_string(r.m) + " n=" + std::to_string(r.n) + " k=" + std::to_string(r.k));
    EXPECT_EQ(p.kernel, r.kernel);
    if (r.kernel == K::Decode) {
      EXPECT_EQ(p.m_rows, r.m_rows);
      EXPECT_EQ(p.vector_loads, r.vector);
      EXPECT_EQ(p.threads, 32u * cuda::kDecodeWarps);
    }
    EXPECT_EQ(p.grid_x, r.grid_x);
    EXPECT_EQ(p.grid_y, r.grid_y);
  }
}

TEST(CudaMoePlan, TilesBelongToTheExpertsWithRows) {
  const int32_t counts[] = {3, 0, 70, 1, 0, 0, 128};
  int32_t offset[8], tile_start[8];
  cuda::plan_expert_tiles(counts, 7, 64, offset, tile_start);
  EXPECT_EQ(std::vector<int32_t>(offset, offset + 8), (std::vector<int32_t>{0, 3, 3, 73, 74, 74, 74, 202}));
  EXPECT_EQ(std::vector<int32_t>(tile_start, tile_start + 8), (std::vector<int32_t>{0, 1, 1, 3, 4, 4, 4, 6}));
  const int64_t owner[] = {0, 2, 2, 3, 6, 6};
  for (int32_t t = 0; t < 6; ++t) EXPECT_EQ(cuda::expert_of_tile(tile_start, 7, t), owner[t]) << t;
  // Every tile's rows lie inside its expert's rows, and the tiles cover them all.
  int64_t covered = 0;
  for (int32_t t = 0; t < tile_start[7]; ++t) {
    const int64_t e = cuda::expert_of_tile(tile_start, 7, t);
    const int64_t row0 = offset[e] + int64_t(t - tile_start[e]) * 64;
    ASSERT_LT(row0, offset[e + 1]) << t;
    covered += std::min<int64_t>(64, offset[e + 1] - row0);
  }
  EXPECT_EQ(covered, offset[7]);
}

// Backend::Cuda with no DeviceContext bound (or no CUDA in the build) is an error that
// names the kernel, never a crash.
TEST(CudaBackend, WithoutADeviceTheEntryThrowsNamingTheKernel) {
  std::vector<float> x(32, 1.0f), w(32, 1.0f), y(1);
  GemmParams p;
  p.m = 1;
  p.x = x.data();
  p.w = {WeightFormat::F32, 1, 32, w.data(), nullptr};
  p.y = y.data();
  ExecContext ctx(1);
  ctx.set_backend(Backend::Cuda);
  ScopedExecContext bind(ctx);
  EXPECT_EQ(active_backend(), Backend::Cuda);
  try {
    gemm(p);
    FAIL() << "gemm under Backend::Cuda without a device returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda::gemm"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, DeviceCountGivesAReasonWhenZero) {
  std::string why;
  const int n = cuda::device_count(&why);
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(cuda::DeviceContext(0), Error);
  }
  EXPECT_STREQ(to_string(Backend::Cuda), "cuda");
  if (!cuda::built()) {
    EXPECT_EQ(n, 0);
  }
}

}  // namespace
}  // namespace troupe::kernels
