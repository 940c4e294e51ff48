// Rope (kernels/rope.h): rope_frequencies against the MODEL.md §5 YaRN numbers
// (tiny: low 0, high 5; full: low 15, high 25), the f64 angle at large positions,
// hand-worked rotations, and every fast variant against the scalar reference.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/rope_rows.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels {
namespace {

using testing::kNaN;

// HandWorked suites run the reference too; FastPaths suites compare with it.
class RopeHandWorked : public testing::ImplTest {};
class RopeFastPaths : public testing::ImplTest {};

// Expected YaRN blend for pair i given the ramp's low and high ends.
double yarn(double theta, int64_t dr, double factor, double low, double high, int64_t i) {
  const double f = std::pow(theta, -2.0 * i / dr);
  const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
  return f / factor * ramp + f * (1 - ramp);
}

TEST(RopeFrequencies, PlainTheta) {
  const auto f = rope_frequencies(10000.0, 64, {});
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f[0], 1.0);
  EXPECT_NEAR(f[16], 0.01, 1e-17);  // 10000^(-32/64)
  EXPECT_NEAR(f[31], std::pow(10000.0, -62.0 / 64), 1e-18);
}

TEST(RopeFrequencies, TinyYarnLow0High5) {
  const YarnScaling tiny{
      .factor = 4, .original_max_position = 256, .beta_fast = 32, .beta_slow = 1};
  const auto f = rope_frequencies(160000.0, 32, tiny);
  ASSERT_EQ(f.size(), 16u);
  EXPECT_EQ(f[0], 1.0);  // ramp 0 at i = low = 0
  for (int64_t i = 1; i < 5; ++i) EXPECT_NEAR(f[i], yarn(160000.0, 32, 4, 0, 5, i), 1e-16) << i;
  for (int64_t i = 5; i < 16; ++i)  // i >= high = 5: divided by 4, exactly
    EXPECT_EQ(f[i], std::pow(160000.0, -2.0 * i / 32) / 4) << i;
}

TEST(RopeFrequencies, FullYarnLow15High25) {
  const YarnScaling full{
      .factor = 16, .original_max_position = 65536, .beta_fast = 32, .beta_slow = 1};
  const auto f = rope_frequencies(160000.0, 64, full);
  ASSERT_EQ(f.size(), 32u);
  for (int64_t i = 0; i <= 15; ++i) EXPECT_EQ(f[i], std::pow(160000.0, -2.0 * i / 64)) << i;
  for (int64_t i = 16; i < 25; ++i)
    EXPECT_NEAR(f[i], yarn(160000.0, 64, 16, 15, 25, i), 1e-18) << i;
  for (int64_t i = 25; i < 32; ++i) EXPECT_EQ(f[i], std::pow(160000.0, -2.0 * i / 64) / 16) << i;
}

TEST(RopeFrequencies, FactorOneMeansNoYarn) {
  EXPECT_EQ(rope_frequencies(160000.0, 32, {.factor = 1, .original_max_position = 256}),
            rope_frequencies(160000.0, 32, {}));
  EXPECT_THROW(rope_frequencies(10000.0, 31, {}), Error);
  EXPECT_THROW(rope_frequencies(0.0, 32, {}), Error);
  EXPECT_THROW(rope_frequencies(10000.0, 32, {.factor = 4}), Error);  // no original length
}

TEST_P(RopeHandWorked, Values) {
  const double freqs[] = {1.0, 0.5};
  for (const auto& v : variants(rope)) {
    // n = 6, Dr = 4: channels 0,1 untouched; pairs (2,3) by 1·p and (4,5) by 0.5·p.
    std::vector<float> x = {5, 6, 1, 0, 0, 2};
    const int64_t pos = 2;
    v.run({.x = x.data(), .count = 1, .n = 6, .rope_dim = 4, .positions = &pos, .freqs = freqs});
    EXPECT_EQ(x[0], 5.0f) << v.name;
    EXPECT_EQ(x[1], 6.0f) << v.name;
    EXPECT_EQ(x[2], static_cast<float>(std::cos(2.0))) << v.name;
    EXPECT_EQ(x[3], static_cast<float>(std::sin(2.0))) << v.name;
    EXPECT_EQ(x[4], -2 * static_cast<float>(std::sin(1.0))) << v.name;
    EXPECT_EQ(x[5], 2 * static_cast<float>(std::cos(1.0))) << v.name;
    // Position 0 is the identity; the inverse rotation undoes the forward one.
    const int64_t zero = 0;
    std::vector<float> y = {1, 2, 3, 4};
    v.run({.x = y.data(), .count = 1, .n = 4, .rope_dim = 4, .positions = &zero, .freqs = freqs});
    EXPECT_EQ(y, (std::vector<float>{1, 2, 3, 4})) << v.name;
    v.run({.x = x.data(),
           .count = 1,
           .n = 6,
           .rope_dim = 4,
           .positions = &pos,
           .freqs = freqs,
           .inverse = true});
    const float back[] = {5, 6, 1, 0, 0, 2};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(x[i], back[i], 1e-6) << v.name << " i=" << i;
  }
}

// NEOX mode rotates channel i with channel i + Dr/2 (inside the last Dr channels).
TEST_P(RopeHandWorked, NeoxPairsAreHalfADimensionApart) {
  const double freqs[] = {1.0, 0.5};
  for (const auto& v : variants(rope)) {
    // n = 6, Dr = 4: channels 0,1 untouched; pairs (2,4) by 1·p and (3,5) by 0.5·p.
    std::vector<float> x = {5, 6, 1, 0, 0, 2};
    const int64_t pos = 2;
    v.run({.x = x.data(), .count = 1, .n = 6, .rope_dim = 4, .positions = &pos, .freqs = freqs,
           .neox = true});
    const float c1 = static_cast<float>(std::cos(2.0)), s1 = static_cast<float>(std::sin(2.0));
    const float c2 = static_cast<float>(std::cos(1.0)), s2 = static_cast<float>(std::sin(1.0));
    EXPECT_EQ(x[0], 5.0f) << v.name;
    EXPECT_EQ(x[1], 6.0f) << v.name;
    EXPECT_EQ(x[2], c1) << v.name;       // (1, 0) by angle 2
    EXPECT_EQ(x[4], s1) << v.name;
    EXPECT_EQ(x[3], -2 * s2) << v.name;  // (0, 2) by angle 1
    EXPECT_EQ(x[5], 2 * c2) << v.name;
  }
}

TEST_P(RopeHandWorked, AngleIsF64AtLargePositions) {
  // φ = 1e6·f in f64, then cos/sin rounded to f32. An f32 angle would be off by
  // up to 0.03 rad at this position, far outside one f32 ulp of cos.
  const double freqs[] = {0.7853981633974483};
  const int64_t pos = 999999;
  for (const auto& v : variants(rope)) {
    std::vector<float> x = {1, 0};
    v.run({.x = x.data(), .count = 1, .n = 2, .rope_dim = 2, .positions = &pos, .freqs = freqs});
    EXPECT_EQ(x[0], static_cast<float>(std::cos(999999 * freqs[0]))) << v.name;
    EXPECT_EQ(x[1], static_cast<float>(std::sin(999999 * freqs[0]))) << v.name;
  }
}

struct RopeCase {
  int64_t groups, per_position, n, rope_dim, pad;
  bool inverse;
  bool neox = false;
};

TEST_P(RopeFastPaths, MatchReference) {
  const RopeCase cases[] = {{1, 1, 32, 32, 0, false},   {3, 4, 64, 32, 1, true},
                            {17, 1, 128, 32, 0, false}, {2, 64, 512, 64, 0, true},
                            {5, 3, 96, 32, 7, false},   {31, 2, 64, 64, 0, false},
                            {1, 17, 34, 2, 0, true},    {33, 1, 512, 64, 16, false},
                            {3, 4, 64, 32, 1, true, true}, {5, 3, 96, 32, 7, false, true},
                            {1, 17, 34, 2, 0, false, true}, {2, 64, 512, 64, 0, false, true}};
  const auto freqs32 = rope_frequencies(160000.0, 32, {.factor = 4, .original_max_position = 256});
  const auto freqs64 = rope_frequencies(10000.0, 64, {});
  const std::vector<double> freqs2 = {0.3};
  std::mt19937 rng(5);
  for (const RopeCase& c : cases) {
    const int64_t count = c.groups * c.per_position, ld = c.n + c.pad;
    std::vector<int64_t> pos(c.groups);
    std::uniform_int_distribution<int64_t> any_pos(0, 1000000);
    for (auto& q : pos) q = any_pos(rng);
    pos[0] = 0;
    if (c.groups > 1) pos[1] = 1000000;
    const double* freqs = c.rope_dim == 32   ? freqs32.data()
                          : c.rope_dim == 64 ? freqs64.data()
                                             : freqs2.data();
    auto x = testing::random_normal(count * ld, 31 + c.n);
    for (int64_t v = 0; v < count; ++v)
      for (int64_t i = c.n; i < ld; ++i) x[v * ld + i] = kNaN;  // padding: must stay NaN
    const RopeParams base{.count = count,
                          .n = c.n,
                          .ld = ld,
                          .rope_dim = c.rope_dim,
                          .positions = pos.data(),
                          .per_position = c.per_position,
                          .freqs = freqs,
                          .inverse = c.inverse,
                          .neox = c.neox};
    std::vector<float> want = x;
    RopeParams p = base;
    p.x = want.data();
    testing::run_ref(rope, p);
    for (const auto& v : variants(rope)) {
      std::vector<float> got = x;
      p.x = got.data();
      v.run(p);
      for (int64_t i = 0; i < count * ld; ++i) {
        const bool rotated = i % ld >= c.n - c.rope_dim && i % ld < c.n;
        if (!rotated) {  // untouched channels and padding keep their exact bits
          ASSERT_EQ(std::memcmp(&got[i], &x[i], 4), 0) << v.name << " i=" << i;
          continue;
        }
        // Two rounded products and one add, as the reference: bit for bit (rope_rows.h).
        ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
            << v.name << " n=" << c.n << " i=" << i << " got " << got[i] << " want " << want[i];
      }
    }
  }
}

TEST(Rope, RejectsBadParams) {
  std::vector<float> x(8);
  const int64_t pos = 0;
  const double f[] = {1.0};
  const RopeParams ok{.x = x.data(),
                      .count = 2,
                      .n = 4,
                      .rope_dim = 2,
                      .positions = &pos,
                      .per_position = 2,
                      .freqs = f};
  rope(ok);
  RopeParams p = ok;
  p.rope_dim = 3;
  EXPECT_THROW(rope(p), Error);
  p = ok;
  p.rope_dim = 6;
  EXPECT_THROW(rope(p), Error);
  p = ok;
  p.per_position = 3;
  EXPECT_THROW(rope(p), Error);
  p = ok;
  p.freqs = nullptr;
  EXPECT_THROW(rope(p), Error);
}

INSTANTIATE_TEST_SUITE_P(Impls, RopeHandWorked, testing::impls_and_ref(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, RopeFastPaths, testing::fast_impls(), testing::impl_name);

}  // namespace
}  // namespace troupe::kernels
