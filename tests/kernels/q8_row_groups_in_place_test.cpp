// Q8_0 / Q4_0 matrices regrouped in place (kernels::regroup_q8_in_place): the bytes are the
// separate copy's (pack_q8_row_groups) exactly; a view with only the groups (data null)
// runs the row-group kernels (AVX-512 VNNI at decode and prefill rows, AVX2) bit for bit as
// the reference does on the GGUF bytes, slices and copies of it keep working, and every
// reader of GGUF blocks (portable and packed kernels, the reference, row dequantization, a
// slice inside a group) refuses it instead of computing on the wrong layout.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
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
#include "model/gguf_dequant.h"
#include "model/weights.h"

namespace troupe::kernels {
namespace {

// Random blocks: any code byte, f16 scales of both signs.
std::vector<uint8_t> random_blocks(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t bb = f == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes;
  std::vector<uint8_t> out(static_cast<size_t>(rows * cols / kQBlock * bb));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t b = 0; b < out.size(); b += size_t(bb)) {
    const uint16_t h = model::f32_to_f16(scale(rng));
    std::memcpy(&out[b], &h, 2);
    for (int64_t i = 2; i < bb; ++i) out[b + size_t(i)] = uint8_t(rng());
  }
  return out;
}

std::vector<float> random_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = normal(rng);
  return x;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "y[" << i << "] = " << got[i] << ", ref " << want[i];
}

// y = x · wᵀ for `m` rows on `kernel` (ref::gemm_q8 when kernel is null).
std::vector<float> run(const WeightView& w, const std::vector<float>& x, int64_t m,
                       const cpu::QGemmKernel* kernel) {
  std::vector<float> y(static_cast<size_t>(m * w.rows), NAN);
  GemmParams p;
  p.x = x.data();
  p.w = w;
  p.m = m;
  p.y = y.data();
  if (kernel) cpu::gemm_q8(p, *kernel);
  else ref::gemm_q8(p);
  return y;
}

TEST(Q8RowGroupsInPlace, BytesAreTheSeparateCopysAndPartGroupsAreRefused) {
  uint32_t seed = 1;
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {64, 1024}, {160, 320}}) {
      SCOPED_TRACE(std::string(to_string(f)) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      std::vector<uint8_t> bytes = random_blocks(f, n, k, seed++);
      const WeightView w{f, n, k, bytes.data(), nullptr};
      std::vector<uint8_t> copy(size_t(q8_row_groups_bytes(w)));
      ASSERT_EQ(copy.size(), bytes.size());  // whole groups: exactly the GGUF bytes
      pack_q8_row_groups(w, copy.data());
      EXPECT_EQ(regroup_q8_in_place(w, bytes.data()), bytes.data());
      EXPECT_EQ(std::memcmp(bytes.data(), copy.data(), copy.size()), 0);
    }
  std::vector<uint8_t> part = random_blocks(WeightFormat::Q8_0, 17, 64, 9);
  EXPECT_THROW(regroup_q8_in_place({WeightFormat::Q8_0, 17, 64, part.data(), nullptr}, part.data()), Error);
}

// Each SIMD path's dispatched kernel on the groups alone: decode rows, the AVX-512
// prefill tiles' rows (above kGroupsDecodeMaxRows, with a 6-row remainder), 1-3 threads.
class InPlacePath : public ::testing::TestWithParam<cpu::QGemmKernel> {
 protected:
  void SetUp() override {
    if (!cpu::q_kernel_supported(GetParam()))
      GTEST_SKIP() << to_string(GetParam()) << ": " << cpu::missing_q_kernel_reason(GetParam());
  }
};

TEST_P(InPlacePath, GroupsAloneGiveTheReferencesBits) {
  const cpu::QGemmKernel kernel = GetParam();
  uint32_t seed = 50;
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{48, 96}, {96, 1024}}) {
      const std::vector<uint8_t> gguf = random_blocks(f, n, k, seed++);
      std::vector<uint8_t> bytes = gguf;
      const WeightView original{f, n, k, gguf.data(), nullptr};
      WeightView only_groups{f, n, k, nullptr, nullptr};
      only_groups.groups = regroup_q8_in_place({f, n, k, bytes.data(), nullptr}, bytes.data());
      for (int64_t m : {int64_t{1}, int64_t{5}, cpu::kGroupsDecodeMaxRows + 5, int64_t{200}}) {
        const std::vector<float> x = random_x(m, k, seed++);
        const std::vector<float> want = run(original, x, m, nullptr);
        for (int threads : {1, 2, 3}) {
          SCOPED_TRACE(std::string(to_string(f)) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m) + " threads=" + std::to_string(threads));
          set_num_threads(threads);
          expect_same_bits(run(only_groups, x, m, &kernel), want);
        }
        set_num_threads(0);
        // An expert-style slice on a group boundary, and a copy of the weight.
        const WeightView slice = model::row_slice(only_groups, 16, 32);
        ASSERT_NE(slice.groups, nullptr);
        EXPECT_EQ(slice.data, nullptr);
        expect_same_bits(run(slice, x, m, &kernel), run(model::row_slice(original, 16, 32), x, m, nullptr));
        std::vector<std::byte> buf(size_t(copied_bytes(only_groups)) + 64);
        EXPECT_EQ(copied_bytes(only_groups), int64_t(bytes.size() + 63) / 64 * 64);
        auto* dst = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) / 64 * 64);
        expect_same_bits(run(copy_weight(only_groups, dst), x, m, &kernel), want);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, InPlacePath,
                         ::testing::Values(cpu::QGemmKernel::Avx512Vnni, cpu::QGemmKernel::Avx2),
                         [](const ::testing::TestParamInfo<cpu::QGemmKernel>& i) {
                           std::string s = to_string(i.param);
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

TEST(Q8RowGroupsInPlace, ReadersOfGgufBlocksRefuseIt) {
  std::vector<uint8_t> bytes = random_blocks(WeightFormat::Q4_0, 32, 64, 77);
  WeightView w{WeightFormat::Q4_0, 32, 64, nullptr, nullptr};
  w.groups = regroup_q8_in_place({WeightFormat::Q4_0, 32, 64, bytes.data(), nullptr}, bytes.data());
  const std::vector<float> x = random_x(20, 64, 3);
  std::vector<float> y(32 * 20);
  EXPECT_THROW(run(w, x, 20, nullptr), Error);  // ref::gemm_q8
  for (cpu::QGemmKernel k : {cpu::QGemmKernel::Portable, cpu::QGemmKernel::Avx512VnniPacked})
    if (cpu::q_kernel_supported(k)) {
      EXPECT_THROW(run(w, x, 20, &k), Error) << to_string(k);
    }
  {
    ScopedCpuPath portable(CpuPath::Portable);  // the dispatched GEMM on the portable kernel
    GemmParams p;
    p.x = x.data();
    p.w = w;
    p.m = 1;
    p.y = y.data();
    EXPECT_THROW(gemm(p), Error);
  }
  EXPECT_THROW(dequantize_rows(w, 0, 1, y.data()), Error);
  EXPECT_THROW(model::row_slice(w, 8, 16), Error);  // inside a group: it would need GGUF rows
}

}  // namespace
}  // namespace troupe::kernels
