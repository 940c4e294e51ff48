// Sampling (kernels/sampling.h): Philox4x32-10 known answers, greedy and its tie rule,
// filters that reduce to greedy, chi-square frequency checks against softmax
// distributions worked out here, Cpu == Ref, and rejected parameters.
#include "kernels/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

using Block = std::array<uint32_t, 4>;

TEST(Philox, KnownAnswers) {  // Random123 kat_vectors, philox4x32 R=10
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformMapping) {
  const uint64_t seed = 0x299f31d0a4093822ull, stream = 0x0370734413198a2eull,
                 counter = 0x85a308d3243f6a88ull;
  // Same words as the third known answer: 0xd16cfe09 >> 8 = 0xd16cfe.
  EXPECT_EQ(philox_uniform(seed, stream, counter), 0xd16cfe / 16777216.0f);
  double sum = 0;
  float lo = 1, hi = 0;
  for (uint64_t c = 0; c < 100000; ++c) {
    const float u = philox_uniform(42, 7, c);
    ASSERT_TRUE(u >= 0.0f && u < 1.0f);
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_LT(lo, 1e-3);
  EXPECT_GT(hi, 1 - 1e-3);
  EXPECT_NE(philox_uniform(42, 7, 0), philox_uniform(42, 8, 0));
  EXPECT_NE(philox_uniform(42, 7, 0), philox_uniform(43, 7, 0));
}

TEST(Argmax, TiesGoToLowestIndex) {
  const std::vector<float> x = {1, 3, -2, 3, 3};
  EXPECT_EQ(argmax(x.data(), 5), 1);
  EXPECT_EQ(argmax(x.data(), 1), 0);
  EXPECT_THROW(argmax(x.data(), 0), Error);
}

// Samples every row of `logits` [rows, vocab] with one parameter set; row r uses
// counter first_counter + r. Output is poisoned first.
std::vector<int32_t> draw(Backend b, const std::vector<float>& logits, int64_t vocab,
                          const SamplingParams& sp, uint64_t stream = 5, uint64_t first_counter = 0) {
  ScopedBackend sb(b);
  const int64_t rows = static_cast<int64_t>(logits.size()) / vocab;
  std::vector<SamplingParams> params(rows, sp);
  std::vector<uint64_t> streams(rows, stream), counters(rows);
  for (int64_t r = 0; r < rows; ++r) counters[r] = first_counter + r;
  std::vector<int32_t> out(rows, -7);
  SampleParams p;
  p.logits = logits.data();
  p.out = out.data();
  p.m = rows;
  p.vocab = vocab;
  p.sampling = params.data();
  p.streams = streams.data();
  p.counters = counters.data();
  sample(p);
  return out;
}

// The same logits row repeated n times (n draws over counters 0..n-1).
std::vector<float> repeat(const std::vector<float>& row, int64_t n) {
  std::vector<float> all;
  for (int64_t i = 0; i < n; ++i) all.insert(all.end(), row.begin(), row.end());
  return all;
}

std::vector<float> random_logits(int64_t rows, int64_t vocab, uint32_t seed, float sd = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> x(rows * vocab);
  for (float& v : x) v = nd(rng);
  return x;
}

const Backend kBackends[] = {Backend::Ref, Backend::Cpu};

TEST(Sample, GreedyTakesLowestTiedArgmax) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f};
  for (Backend b : kBackends) {
    for (int32_t t : draw(b, repeat(row, 9), 4, SamplingParams{})) EXPECT_EQ(t, 1);
  }
}

TEST(Sample, SameTripleSameTokenAndCountersSpread) {
  const std::vector<float> row(16, 0.0f);  // uniform over 16 tokens
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 99;
  for (Backend b : kBackends) {
    const std::vector<int32_t> a = draw(b, repeat(row, 200), 16, sp);
    EXPECT_EQ(a, draw(b, repeat(row, 200), 16, sp)) << to_string(b);
    EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()).size(), 16u) << to_string(b);
    EXPECT_NE(a, draw(b, repeat(row, 200), 16, sp, /*stream=*/6)) << to_string(b);
  }
}

TEST(Sample, FiltersThatLeaveOneTokenAreGreedy) {
  const int64_t vocab = 1000;
  const std::vector<float> logits = random_logits(64, vocab, 3);
  std::vector<int32_t> greedy;
  for (int64_t r = 0; r < 64; ++r) greedy.push_back(argmax(&logits[r * vocab], vocab));
  SamplingParams top_k, top_p, min_p;
  top_k.temperature = top_p.temperature = min_p.temperature = 1.0f;
  top_k.top_k = 1;
  top_p.top_p = 1e-6f;
  min_p.min_p = 1.0f;
  for (Backend b : kBackends) {
    EXPECT_EQ(draw(b, logits, vocab, top_k), greedy) << "top_k=1 " << to_string(b);
    EXPECT_EQ(draw(b, logits, vocab, top_p), greedy) << "top_p tiny " << to_string(b);
    EXPECT_EQ(draw(b, logits, vocab, min_p), greedy) << "min_p=1 " << to_string(b);
  }
}

// Pearson chi-square of token counts against probabilities `want` (0 = never drawn).
double chi_square(const std::vector<int32_t>& tokens, const std::vector<double>& want) {
  std::vector<double> count(want.size(), 0);
  for (int32_t t : tokens) count.at(t) += 1;
  double chi2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " is filtered out but was drawn";
      continue;
    }
    const double expect = want[i] * tokens.size();
    chi2 += (count[i] - expect) * (count[i] - expect) / expect;
  }
  return chi2;
}

// p = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02} as logits at temperature 1, and the
// distribution each filter leaves (worked out by hand, renormalised).
struct FilterCase {
  const char* what;
  SamplingParams sp;
  std::vector<double> want;
};

TEST(Sample, FrequenciesFollowTheFilteredSoftmax) {
  const std::vector<double> p = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02};
  std::vector<float> row;
  for (double v : p) row.push_back(static_cast<float>(std::log(v) + 3));
  auto norm = [](std::vector<double> v) {
    double s = 0;
    for (double x : v) s += x;
    for (double& x : v) x /= s;
    return v;
  };
  const FilterCase cases[] = {
      {"plain", {1.0f, 0, 1.0f, 0.0f, 11}, p},
      {"top_k 3", {1.0f, 3, 1.0f, 0.0f, 12}, norm({0.4, 0.25, 0.15, 0, 0, 0, 0})},
      {"top_p 0.75", {1.0f, 0, 0.75f, 0.0f, 13}, norm({0.4, 0.25, 0.15, 0, 0, 0, 0})},
      {"min_p 0.2", {1.0f, 0, 1.0f, 0.2f, 14}, norm({0.4, 0.25, 0.15, 0.1, 0, 0, 0})},
      // top-p over the top-3 mass 0.8: needs 0.64, so 0.4 + 0.25 is enough.
      {"top_k 3 + top_p 0.8", {1.0f, 3, 0.8f, 0.0f, 15}, norm({0.4, 0.25, 0, 0, 0, 0, 0})},
  };
  // 9 degrees of freedom at most; P(chi2 > 30) < 5e-4 for a correct sampler, and the
  // draws are fixed by the seeds, so the test is deterministic.
  for (const FilterCase& c : cases) {
    for (Backend b : kBackends) {
      const std::vector<int32_t> tokens = draw(b, repeat(row, 20000), 7, c.sp);
      EXPECT_LT(chi_square(tokens, c.want), 30.0) << c.what << " " << to_string(b);
    }
  }
  // Temperature 2 flattens: p_i ∝ p_i^(1/2).
  std::vector<double> flat;
  for (double v : p) flat.push_back(std::sqrt(v));
  const std::vector<int32_t> hot = draw(Backend::Cpu, repeat(row, 20000), 7, {2.0f, 0, 1.0f, 0.0f, 16});
  EXPECT_LT(chi_square(hot, norm(flat)), 30.0);
}

TEST(Sample, MaskedTokensAreNeverDrawn) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> row = {ninf, 0.0f, ninf, 0.0f, ninf};
  for (Backend b : kBackends) {
    for (int32_t t : draw(b, repeat(row, 500), 5, {1.0f, 0, 1.0f, 0.0f, 1})) {
      ASSERT_TRUE(t == 1 || t == 3) << t;
    }
  }
}

// The lazy partial sort of the fast path must give the reference's tokens exactly,
// at the real vocabulary size too.
TEST(Sample, CpuMatchesRef) {
  struct Case { int64_t vocab, rows; SamplingParams sp; };
  const Case cases[] = {
      {1, 3, {1.0f, 0, 1.0f, 0.0f, 1}},         {17, 40, {0.7f, 0, 1.0f, 0.0f, 2}},
      {33, 40, {1.3f, 5, 0.9f, 0.0f, 3}},       {1000, 40, {1.0f, 0, 0.95f, 0.0f, 4}},
      {1000, 40, {1.0f, 50, 1.0f, 0.05f, 5}},   {1000, 40, {0.5f, 2000, 0.5f, 0.01f, 6}},
      {129280, 8, {1.0f, 0, 1.0f, 0.0f, 7}},    {129280, 8, {0.8f, 40, 0.9f, 0.0f, 8}},
      {129280, 8, {1.0f, 0, 0.9f, 0.02f, 9}},
  };
  for (const Case& c : cases) {
    const std::vector<float> logits = random_logits(c.rows, c.vocab, 17 + c.sp.seed);
    EXPECT_EQ(draw(Backend::Cpu, logits, c.vocab, c.sp), draw(Backend::Ref, logits, c.vocab, c.sp))
        << "vocab=" << c.vocab << " seed=" << c.sp.seed;
  }
}

TEST(Sample, MixedRowsAllWritten) {
  const int64_t vocab = 31, rows = 33;
  const std::vector<float> logits = random_logits(rows, vocab, 5);
  std::vector<SamplingParams> params(rows);
  for (int64_t r = 0; r < rows; ++r) params[r] = {r % 3 == 0 ? 0.0f : 1.0f, int32_t(r % 4), 1.0f, 0.0f, 9};
  std::vector<uint64_t> streams(rows, 1), counters(rows, 2);
  for (Backend b : kBackends) {
    ScopedBackend sb(b);
    std::vector<int32_t> out(rows, -7);
    sample({logits.data(), out.data(), rows, vocab, params.data(), streams.data(), counters.data()});
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(out[r] >= 0 && out[r] < vocab) << "row " << r;
      if (r % 3 == 0) {
        EXPECT_EQ(out[r], argmax(&logits[r * vocab], vocab));
      }
    }
  }
}

TEST(Sample, RejectsBadParams) {
  const std::vector<float> logits(8, 0.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const SamplingParams bad[] = {
      {-1.0f, 0, 1.0f, 0.0f, 0}, {nan, 0, 1.0f, 0.0f, 0},  {inf, 0, 1.0f, 0.0f, 0},
      {1.0f, -1, 1.0f, 0.0f, 0}, {1.0f, 0, 0.0f, 0.0f, 0}, {1.0f, 0, 1.5f, 0.0f, 0},
      {1.0f, 0, nan, 0.0f, 0},   {1.0f, 0, 1.0f, -0.1f, 0}, {1.0f, 0, 1.0f, 1.1f, 0},
  };
  for (const SamplingParams& sp : bad) EXPECT_THROW(draw(Backend::Cpu, logits, 8, sp), Error);
  int32_t out = -1;
  SamplingParams sampled;
  sampled.temperature = 1.0f;
  SampleParams p{logits.data(), &out, 1, 8, &sampled, nullptr, nullptr};
  EXPECT_THROW(sample(p), Error);  // sampling needs streams and counters
  const SamplingParams greedy;
  p.sampling = &greedy;
  EXPECT_NO_THROW(sample(p));
  EXPECT_EQ(out, 0);
  p.vocab = 0;
  EXPECT_THROW(sample(p), Error);
}

}  // namespace
}  // namespace troupe::kernels
