// Attention with a sink (kernels/attention.h, MODEL.md §5.3): hand-worked
// weights, empty key sets, and every fast variant against the scalar reference
// over gathered key pointers with gaps (null) and repeats.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/attention_rows.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels {
namespace {

using testing::kNaN;

// HandWorked suites run the reference too; FastPaths suites compare with it.
class AttentionHandWorked : public testing::ImplTest {};
class AttentionFastPaths : public testing::ImplTest {};

TEST_P(AttentionHandWorked, Values) {
  // One head, dim 2, K1 = [1, 0], K2 = [0, 1], q = [ln 3, 0], scale 1:
  // logits ln3 and 0, max ln3, weights 1 and 1/3. Sink logit 0 adds e^{-ln3} = 1/3:
  //   with sink:    ([1,0] + [0,1]/3) / (5/3) = [0.6, 0.2]
  //   without sink: ([1,0] + [0,1]/3) / (4/3) = [0.75, 0.25]
  const float k1[] = {1, 0}, k2[] = {0, 1};
  const float* keys[] = {k1, nullptr, k2};  // the null slot is skipped
  const float q[] = {std::log(3.0f), 0}, sink = 0;
  for (const auto& v : variants(attention)) {
    float out[2] = {kNaN, kNaN};
    AttentionParams p{.q = q,
                      .keys = keys,
                      .sink = &sink,
                      .out = out,
                      .m = 1,
                      .heads = 1,
                      .dim = 2,
                      .max_keys = 3,
                      .scale = 1};
    v.run(p);
    EXPECT_NEAR(out[0], 0.6f, 1e-6) << v.name;
    EXPECT_NEAR(out[1], 0.2f, 1e-6) << v.name;
    p.sink = nullptr;
    v.run(p);
    EXPECT_NEAR(out[0], 0.75f, 1e-6) << v.name;
    EXPECT_NEAR(out[1], 0.25f, 1e-6) << v.name;
  }
}

TEST_P(AttentionHandWorked, NoKeysGivesZero) {
  // With only the sink (zero value) or nothing at all, the output is exactly 0.
  const float q[4] = {1, 2, 3, 4}, sink[2] = {0.5f, -1};
  const float* keys[2] = {nullptr, nullptr};
  for (const auto& v : variants(attention))
    for (const float* s : {static_cast<const float*>(sink), static_cast<const float*>(nullptr)})
      for (int64_t max_keys : {0, 2}) {
        float out[4] = {kNaN, kNaN, kNaN, kNaN};
        v.run({.q = q,
               .keys = max_keys ? keys : nullptr,
               .sink = s,
               .out = out,
               .m = 1,
               .heads = 2,
               .dim = 2,
               .max_keys = max_keys});
        for (float o : out) EXPECT_EQ(o, 0.0f) << v.name;
      }
}

struct AttnCase {
  int64_t m, heads, dim, max_keys;
  bool sink;
  float scale_mul;  // scale = scale_mul / sqrt(dim); large values make peaky softmaxes
};

// Key pointers for m queries into a pool of rows: ~20% null, some rows repeated.
std::vector<const float*> gather(const std::vector<float>& pool, int64_t pool_rows, int64_t dim,
                                 int64_t m, int64_t max_keys, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> row(0, pool_rows - 1);
  std::vector<const float*> keys(m * max_keys);
  for (auto& k : keys) k = rng() % 5 == 0 ? nullptr : pool.data() + row(rng) * dim;
  return keys;
}

TEST_P(AttentionFastPaths, MatchReference) {
  const AttnCase cases[] = {
      {1, 1, 32, 1, true, 1},       {3, 4, 64, 17, false, 1}, {2, 9, 96, 300, true, 1},
      {1, 64, 512, 300, true, 1},   {3, 4, 128, 0, true, 1},  {2, 3, 17, 33, true, 8},
      {1, 16, 128, 300, false, 16}, {5, 2, 31, 17, true, 1},  {2, 64, 512, 640, true, 4}};
  for (const AttnCase& c : cases) {
    const int64_t pool_rows = 64;
    const auto pool = testing::random_normal(pool_rows * c.dim, 41 + c.dim);
    const auto q = testing::random_normal(c.m * c.heads * c.dim, 42 + c.heads);
    const auto sink = testing::random_normal(c.heads, 43);
    const auto keys = gather(pool, pool_rows, c.dim, c.m, c.max_keys, 44 + c.max_keys);
    AttentionParams p{.q = q.data(),
                      .keys = keys.data(),
                      .sink = c.sink ? sink.data() : nullptr,
                      .m = c.m,
                      .heads = c.heads,
                      .dim = c.dim,
                      .max_keys = c.max_keys,
                      .scale = c.scale_mul / std::sqrt(float(c.dim))};
    std::vector<float> want(c.m * c.heads * c.dim, kNaN);
    p.out = want.data();
    testing::run_ref(attention, p);
    for (const auto& v : variants(attention)) {
      std::vector<float> got(want.size(), kNaN);
      p.out = got.data();
      v.run(p);
      // Outputs are convex-ish mixes of N(0,1) rows: an absolute bound fits.
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(testing::close(got[i], want[i], 2e-5f, 1e-5f))
            << v.name << " m=" << c.m << " heads=" << c.heads << " dim=" << c.dim
            << " keys=" << c.max_keys << " i=" << i << " got " << got[i] << " want " << want[i];
    }
  }
}

TEST(Attention, RejectsBadParams) {
  const float q[2] = {}, *keys[1] = {q};
  float out[2];
  const AttentionParams ok{
      .q = q, .keys = keys, .out = out, .m = 1, .heads = 1, .dim = 2, .max_keys = 1};
  attention(ok);
  AttentionParams p = ok;
  p.heads = 0;
  EXPECT_THROW(attention(p), Error);
  p = ok;
  p.keys = nullptr;
  EXPECT_THROW(attention(p), Error);
  p = ok;
  p.out = nullptr;
  EXPECT_THROW(attention(p), Error);
  p = ok;
  p.scale = std::nanf("");
  EXPECT_THROW(attention(p), Error);
}

INSTANTIATE_TEST_SUITE_P(Impls, AttentionHandWorked, testing::impls_and_ref(), testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, AttentionFastPaths, testing::fast_impls(), testing::impl_name);

}  // namespace
}  // namespace troupe::kernels
