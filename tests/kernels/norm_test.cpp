// RMSNorm and softmax (kernels/norm.h): hand-worked values on every path, then
// tables of awkward shapes comparing each fast variant with the scalar reference,
// with poisoned outputs and stride padding that must stay untouched.
#include "kernels/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/norm_rows.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels {
namespace {

using testing::kInf;
using testing::kNaN;

// HandWorked suites run the reference too; FastPaths suites compare with it.
class RmsNormHandWorked : public testing::ImplTest {};
class RmsNormFastPaths : public testing::ImplTest {};
class SoftmaxHandWorked : public testing::ImplTest {};
class SoftmaxFastPaths : public testing::ImplTest {};

TEST_P(RmsNormHandWorked, Values) {
  // mean(3², 4²) = 12.5; 1/sqrt(12.5) = 0.28284271
  const std::vector<float> x = {3, 4}, w = {2, 0.5f};
  for (const auto& v : variants(rms_norm)) {
    std::vector<float> out(2, kNaN);
    v.run({.x = x.data(), .weight = w.data(), .out = out.data(), .rows = 1, .n = 2, .eps = 0});
    EXPECT_NEAR(out[0], 2 * 3 * 0.28284271f, 1e-6) << v.name;
    EXPECT_NEAR(out[1], 0.5f * 4 * 0.28284271f, 1e-6) << v.name;
    // eps = 1e-20 on an all-zero row (the full config's eps) gives zeros, not NaN.
    std::vector<float> zeros(33, 0.0f), out2(33, kNaN);
    v.run({.x = zeros.data(), .out = out2.data(), .rows = 1, .n = 33, .eps = 1e-20f});
    for (float o : out2) EXPECT_EQ(o, 0.0f) << v.name;
  }
}

struct RmsCase {
  int64_t rows, n, pad;  // pad: extra floats per row in both x and out (ld = n + pad)
  bool weight, in_place;
};

TEST_P(RmsNormFastPaths, MatchReference) {
  const RmsCase cases[] = {{1, 1, 0, true, false},    {3, 3, 1, false, false},
                           {17, 17, 0, true, true},   {2, 31, 5, true, false},
                           {5, 33, 0, false, true},   {4, 64, 3, true, false},
                           {3, 96, 0, true, false},   {1, 128, 16, true, true},
                           {2, 5120, 0, true, false}, {1, 16384, 0, false, false}};
  for (const RmsCase& c : cases) {
    const int64_t ld = c.n + c.pad;
    const auto x = testing::random_normal(c.rows * ld, 11 + c.n, 3.0f);
    const auto w = testing::random_normal(c.n, 12 + c.n);
    std::vector<float> want(c.rows * ld, -7.0f);
    const RmsNormParams base{.x = x.data(),
                             .weight = c.weight ? w.data() : nullptr,
                             .rows = c.rows,
                             .n = c.n,
                             .ld = ld,
                             .ld_out = ld,
                             .eps = 1e-6f};
    RmsNormParams p = base;
    p.out = want.data();
    testing::run_ref(rms_norm, p);
    for (const auto& v : variants(rms_norm)) {
      std::vector<float> got = c.in_place ? x : std::vector<float>(c.rows * ld, kNaN);
      for (int64_t r = 0; r < c.rows; ++r)  // padding holds a sentinel that must survive
        for (int64_t i = c.n; i < ld; ++i) got[r * ld + i] = -7.0f;
      p.x = c.in_place ? got.data() : x.data();
      p.out = got.data();
      v.run(p);
      for (int64_t i = 0; i < c.rows * ld; ++i)
        ASSERT_TRUE(testing::close(got[i], want[i], 1e-6f, 2e-6f))
            << v.name << " rows=" << c.rows << " n=" << c.n << " i=" << i << " got " << got[i]
            << " want " << want[i];
    }
  }
}

TEST(RmsNorm, RejectsBadParams) {
  std::vector<float> x(4), out(4);
  EXPECT_THROW(rms_norm({.x = x.data(), .out = out.data(), .rows = 1, .n = 0}), Error);
  EXPECT_THROW(rms_norm({.x = nullptr, .out = out.data(), .rows = 1, .n = 4}), Error);
  EXPECT_THROW(rms_norm({.x = x.data(), .out = out.data(), .rows = 1, .n = 4, .ld = 2}), Error);
  EXPECT_THROW(rms_norm({.x = x.data(), .out = out.data(), .rows = 1, .n = 4, .eps = -1}), Error);
  rms_norm({.x = nullptr, .out = nullptr, .rows = 0, .n = 4});  // no rows: nothing to do
}

TEST_P(SoftmaxHandWorked, Values) {
  const float ln2 = std::log(2.0f);
  for (const auto& v : variants(softmax)) {
    // Row 0: [0, ln2, -inf] -> [1/3, 2/3, 0]. Row 1: all masked -> zeros.
    // Row 2: huge equal logits stay finite thanks to max subtraction.
    std::vector<float> x = {0, ln2, -kInf, -kInf, -kInf, -kInf, 1e30f, 1e30f, -kInf};
    v.run({.x = x.data(), .rows = 3, .n = 3});
    const float want[] = {1 / 3.0f, 2 / 3.0f, 0, 0, 0, 0, 0.5f, 0.5f, 0};
    for (int i = 0; i < 9; ++i) EXPECT_NEAR(x[i], want[i], 1e-6) << v.name << " i=" << i;
    std::vector<float> one = {-123.0f};
    v.run({.x = one.data(), .rows = 1, .n = 1});
    EXPECT_EQ(one[0], 1.0f) << v.name;
  }
}

TEST_P(SoftmaxFastPaths, MatchReference) {
  const int64_t sizes[][3] = {{1, 1, 0},  {3, 3, 2},   {17, 17, 0},  {2, 31, 1},
                              {5, 33, 7}, {4, 100, 0}, {2, 1000, 0}, {1, 4096, 3}};
  for (const auto& s : sizes) {
    const int64_t rows = s[0], n = s[1], ld = n + s[2];
    auto x = testing::random_normal(rows * ld, 21 + n, 4.0f);
    for (size_t i = 0; i < x.size(); i += 5) x[i] = -kInf;  // masked entries
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = n; i < ld; ++i) x[r * ld + i] = -7.0f;  // padding sentinel
    std::vector<float> want = x;
    testing::run_ref(softmax, SoftmaxParams{.x = want.data(), .rows = rows, .n = n, .ld = ld});
    for (const auto& v : variants(softmax)) {
      std::vector<float> got = x;
      v.run({.x = got.data(), .rows = rows, .n = n, .ld = ld});
      for (int64_t i = 0; i < rows * ld; ++i)
        ASSERT_TRUE(testing::close(got[i], want[i], 1e-9f, 1e-5f))
            << v.name << " rows=" << rows << " n=" << n << " i=" << i << " got " << got[i]
            << " want " << want[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, RmsNormHandWorked, testing::impls_and_ref(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, SoftmaxHandWorked, testing::impls_and_ref(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, RmsNormFastPaths, testing::fast_impls(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, SoftmaxFastPaths, testing::fast_impls(), testing::impl_name);

}  // namespace
}  // namespace troupe::kernels
