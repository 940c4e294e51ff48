// Logprobs of sampled tokens (runtime/executor/logprobs.h) and through the engine: the
// values are the log-softmax of the raw logits, computed here independently in f64 from
// the plain single-request forward of the golden model.
#include "runtime/executor/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "kernels/check.h"
#include "runtime/engine.h"
#include "support/plain_forward.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;
using testing::log_softmax_f64;

// The top list is sorted by logprob (equal logits by lower id: HandWorkedRow) and has no
// repeats.
void expect_ranked(const std::vector<Logprob>& top) {
  std::set<int32_t> seen;
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_TRUE(seen.insert(top[i].token).second) << "token " << top[i].token << " twice";
    if (i > 0) {
      EXPECT_GE(top[i - 1].logprob, top[i].logprob) << "rank " << i;
    }
  }
}

TEST(Logprobs, HandWorkedRow) {
  // lse = log(e^1 + 2 e^3 + e^0); ids 1 and 2 tie: the lower id ranks first.
  const std::vector<float> z = {1.0f, 3.0f, 3.0f, 0.0f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + 1.0);
  EXPECT_NEAR(log_sum_exp(z), lse, 1e-12);
  const SampleLogprobs lp = sample_logprobs(z, 0, 2);
  EXPECT_EQ(lp.sampled.token, 0);
  EXPECT_NEAR(lp.sampled.logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_NEAR(lp.top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
}

TEST(Logprobs, KZeroLargerThanVocabAndMaskedTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> z = {-inf, 2.0f, -inf, 1.0f};
  EXPECT_TRUE(sample_logprobs(z, 1, 0).top.empty());
  const SampleLogprobs all = sample_logprobs(z, 3, 10);  // k > vocab; -inf ranks nowhere
  ASSERT_EQ(all.top.size(), 2u);
  EXPECT_EQ(all.top[0].token, 1);
  EXPECT_EQ(all.top[1].token, 3);
  EXPECT_NEAR(std::exp(double(all.top[0].logprob)) + std::exp(double(all.top[1].logprob)), 1.0,
              1e-6);
  EXPECT_EQ(sample_logprobs(z, 0, 1).sampled.logprob, -inf);
  EXPECT_THROW(sample_logprobs(z, 4, 1), Error);
  EXPECT_THROW(sample_logprobs(z, -1, 1), Error);
  EXPECT_THROW(sample_logprobs(z, 0, -1), Error);
  EXPECT_THROW(log_sum_exp({}), Error);
}

// f32 rounding of a logprob of this size: relative 1e-5 (absolute below 1).
double tolerance(double logprob) {
  return 1e-5 * std::max(1.0, std::abs(logprob));
}

// Random rows of awkward sizes, with ties and large magnitudes: every value against the
// f64 reference; with k = vocab the list is the whole distribution, whose log-sum-exp is 0.
TEST(Logprobs, RandomRowsAgainstF64Reference) {
  std::mt19937 rng(11);
  for (int64_t vocab : {1, 3, 17, 31, 33, 100, 4096}) {
    for (float scale : {1.0f, 30.0f, 1000.0f}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " scale " + std::to_string(scale));
      std::normal_distribution<float> d(0.0f, scale);
      std::vector<float> z(static_cast<size_t>(vocab));
      for (float& v : z) v = d(rng);
      if (vocab > 4) z[3] = z[1];  // a tie
      const std::vector<double> ref = log_softmax_f64(z);
      const int32_t token = int32_t(rng() % uint32_t(vocab));
      for (int32_t k : {0, 1, 5, 20, int32_t(vocab)}) {
        const SampleLogprobs lp = sample_logprobs(z, token, k);
        EXPECT_EQ(lp.sampled.token, token);
        EXPECT_NEAR(lp.sampled.logprob, ref[size_t(token)], tolerance(ref[size_t(token)]));
        ASSERT_EQ(lp.top.size(), size_t(std::min<int64_t>(k, vocab)));
        expect_ranked(lp.top);
        for (size_t j = 0; j + 1 < lp.top.size() && vocab > 4; ++j)  // the tie: 1 before 3
          EXPECT_FALSE(lp.top[j].token == 3 && lp.top[j + 1].token == 1);
        for (const Logprob& t : lp.top)
          EXPECT_NEAR(t.logprob, ref[size_t(t.token)], tolerance(ref[size_t(t.token)]));
        if (k == vocab) {
          std::vector<float> all;
          for (const Logprob& t : lp.top) all.push_back(t.logprob);
          EXPECT_NEAR(log_sum_exp(all), 0.0, 1e-5);
        }
      }
    }
  }
}

// --- through the engine ------------------------------------------------------------------

struct Generated {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
};

EngineConfig engine_config() {
  EngineConfig c;
  c.kv_budget_bytes = 64 << 20;
  c.block_size = 16;
  c.scheduler.max_num_batched_tokens = 32;  // chunked prefill of the longer prompt
  c.scheduler.max_model_len = 1024;
  c.executor.bounded_replay = false;  // every layer on every token, as the plain forward
  c.enable_prefix_cache = false;
  return c;
}

std::map<RequestId, Generated> run_engine(
    const std::vector<std::pair<std::vector<int32_t>, RequestParams>>& requests) {
  Engine e(*golden_model().forward, nullptr, engine_config());
  for (size_t i = 0; i < requests.size(); ++i)
    e.add_request(RequestId(i), requests[i].first, requests[i].second);
  std::map<RequestId, Generated> out;
  for (int steps = 0; e.has_unfinished() && steps < 1000; ++steps) {
    for (const RequestOutput& o : e.step()) {
      Generated& g = out[o.id];
      g.tokens.insert(g.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      g.logprobs.insert(g.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
  }
  EXPECT_FALSE(e.has_unfinished());
  return out;
}

RequestParams params(int32_t num_logprobs, float temperature, int64_t max_tokens) {
  RequestParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.num_logprobs = num_logprobs;
  p.sampling.temperature = temperature;
  p.sampling.top_k = temperature > 0 ? 50 : 0;  // must not change the (raw) logprobs
  p.sampling.seed = 5;
  return p;
}

// Greedy and sampled requests batched together: each token's logprob and top list equal
// the f64 log-softmax of the plain forward's raw logits (before temperature and top-k);
// greedy tokens are the argmax, so their logprob is the top one; a request that asked for
// none gets none.
TEST(EngineLogprobs, EqualTheLogSoftmaxOfThePlainForward) {
  const int64_t n = 6;
  const std::vector<std::pair<std::vector<int32_t>, RequestParams>> requests = {
      {testing::random_tokens(40, 1), params(5, 0.0f, n)},
      {testing::random_tokens(7, 2), params(0, 0.0f, n)},
      {testing::random_tokens(12, 3), params(3, 0.9f, n)},
      {testing::random_tokens(9, 4), params(-1, 0.0f, n)},
  };
  const auto got = run_engine(requests);
  ASSERT_EQ(got.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    SCOPED_TRACE("request " + std::to_string(r));
    const Generated& g = got.at(RequestId(r));
    const RequestParams& p = requests[r].second;
    ASSERT_EQ(int64_t(g.tokens.size()), n);
    if (p.num_logprobs < 0) {
      EXPECT_TRUE(g.logprobs.empty());
      continue;
    }
    ASSERT_EQ(g.logprobs.size(), g.tokens.size());
    const auto rows = testing::plain_logits(requests[r].first, g.tokens);
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      SCOPED_TRACE("token " + std::to_string(i));
      const std::vector<double> ref = log_softmax_f64(rows[i]);
      const SampleLogprobs& lp = g.logprobs[i];
      EXPECT_EQ(lp.sampled.token, g.tokens[i]);
      EXPECT_NEAR(lp.sampled.logprob, ref[size_t(g.tokens[i])], 1e-4);
      ASSERT_EQ(int64_t(lp.top.size()), p.num_logprobs);
      expect_ranked(lp.top);
      for (const Logprob& t : lp.top) EXPECT_NEAR(t.logprob, ref[size_t(t.token)], 1e-4);
      // The top entries are the largest: nothing outside them is above the last one.
      if (!lp.top.empty()) {
        const double cut = ref[size_t(lp.top.back().token)];
        int64_t above = 0;
        for (double v : ref) above += v > cut + 1e-4 ? 1 : 0;
        EXPECT_LT(above, int64_t(lp.top.size()));
      }
      double lse = -std::numeric_limits<double>::infinity();
      for (double v : ref) lse = std::max(lse, v) + std::log1p(std::exp(-std::abs(lse - v)));
      EXPECT_NEAR(lse, 0.0, 1e-5);  // the reference is a distribution
      if (p.sampling.temperature == 0.0f) {
        EXPECT_EQ(g.tokens[i], int32_t(std::max_element(ref.begin(), ref.end()) - ref.begin()));
        EXPECT_NEAR(lp.sampled.logprob, *std::max_element(ref.begin(), ref.end()), 1e-4);
        if (!lp.top.empty()) {
          EXPECT_EQ(lp.top[0].token, lp.sampled.token);
          EXPECT_EQ(lp.top[0].logprob, lp.sampled.logprob);
        }
      }
    }
  }
}

}  // namespace
}  // namespace troupe::runtime
