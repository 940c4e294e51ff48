// moe_combine (kernels/moe.h) on every CPU path against a plain loop written here: each
// token's out row plus its picked rows' weighted values, k ascending, every product
// rounded before its add. The fast paths sum a token's rows in one pass over out (AVX2,
// AVX-512: kernels/cpu/moe_combine_simd.h); this checks that pass bit for bit, apart from
// the scalar helper (moe_detail::combine_row) the reference and the portable path share.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/moe.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels::testing {
namespace {

struct CombineCase {
  int64_t m, top_k, hidden, rows;
};

// y rows scaled per row over ~2^-20..2^20, so the sums round at every add.
std::vector<float> expert_rows(const CombineCase& c) {
  std::vector<float> y = random_normal(c.rows * c.hidden, 11);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.hidden; ++j)
      y[r * c.hidden + j] *= std::ldexp(1.0f, int((r * 7) % 41) - 20);
  return y;
}

// Rows picked out of order, about one slot in five skipped, and token 1 with no rows.
std::vector<int64_t> picked_rows(const CombineCase& c) {
  std::vector<int64_t> row_of(c.m * c.top_k);
  for (int64_t i = 0; i < c.m * c.top_k; ++i) row_of[i] = (i * 37 + 5) % c.rows;
  for (int64_t i = 3; i < c.m * c.top_k; i += 5) row_of[i] = -1;
  if (c.m > 1)
    for (int64_t k = 0; k < c.top_k; ++k) row_of[c.top_k + k] = -1;
  return row_of;
}

// The definition, plainly: out[t] + w_0 · y_0 + w_1 · y_1 + ..., k ascending, each term
// rounded to f32 before it is added (this file has no FMA to contract into).
std::vector<float> plain_combine(const CombineCase& c, std::vector<float> out,
                                 const std::vector<float>& y, const std::vector<int64_t>& row_of,
                                 const std::vector<float>& w) {
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t k = 0; k < c.top_k; ++k) {
      const int64_t row = row_of[t * c.top_k + k];
      if (row < 0) continue;
      for (int64_t j = 0; j < c.hidden; ++j) {
        const float term = w[t * c.top_k + k] * y[row * c.hidden + j];
        out[t * c.hidden + j] = out[t * c.hidden + j] + term;
      }
    }
  return out;
}

using MoeCombine = ImplTest;

TEST_P(MoeCombine, EqualsThePlainSumBitForBit) {
  // hidden: a vector multiple, one with a tail on both widths, one shorter than a vector.
  for (const CombineCase c : {CombineCase{37, 6, 1024, 50}, CombineCase{9, 8, 37, 20},
                              CombineCase{5, 2, 5, 7}, CombineCase{1, 1, 16, 1}}) {
    SCOPED_TRACE(::testing::Message()
                 << "m " << c.m << " top_k " << c.top_k << " hidden " << c.hidden);
    const std::vector<float> y = expert_rows(c), w = random_normal(c.m * c.top_k, 12);
    const std::vector<int64_t> row_of = picked_rows(c);
    std::vector<float> out = random_normal(c.m * c.hidden, 13, 4.0f);
    out[0] = -0.0f;
    const std::vector<float> want = plain_combine(c, out, y, row_of, w);
    MoeCombineParams p;
    p.out = out.data();
    p.y = y.data();
    p.row_of = row_of.data();
    p.weight = w.data();
    p.m = c.m;
    p.top_k = c.top_k;
    p.hidden = c.hidden;
    for (const auto& v : variants(&moe_combine)) v.run(p);
    int64_t differ = 0;
    for (size_t i = 0; i < out.size(); ++i)
      differ += std::memcmp(&out[i], &want[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0) << "of " << out.size() << " values";
    if (c.m > 1) {  // token 1 has no rows: its out row is left as it was
      const std::vector<float> before = random_normal(c.m * c.hidden, 13, 4.0f);
      EXPECT_EQ(std::memcmp(&out[c.hidden], &before[c.hidden], c.hidden * sizeof(float)), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, MoeCombine, impls_and_ref(), impl_name);

}  // namespace
}  // namespace troupe::kernels::testing
