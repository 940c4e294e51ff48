// Indexer score and top-k (kernels/indexer.h, MODEL.md §5.4). Scores: hand-worked
// values, candidate lists with repeats and -1, rows whose relu terms are all zero
// (exact 0 ties), every fast variant against the reference, and independence from
// the thread count. Top-k: hand-worked ties, ±0, ±inf, NaN, and many random
// tie-heavy inputs against a std::stable_sort reference written here.
#include "kernels/indexer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/indexer_rows.h"
#include "kernels/parallel.h"
#include "tests/kernels/fast_path_util.h"

namespace troupe::kernels {
namespace {

using testing::kInf;
using testing::kNaN;

// HandWorked suites run the reference too; FastPaths suites compare with it.
class IndexerScoreHandWorked : public testing::ImplTest {};
class IndexerScoreFastPaths : public testing::ImplTest {};

TEST_P(IndexerScoreHandWorked, Values) {
  // Heads q0 = [1, 0], q1 = [0, 1] with weights 2 and -1.
  //   K0 = [1, 1]:   2·1 - 1·1 = 1        K1 = [-1, 2]: 2·0 - 1·2 = -2
  //   K2 = [-1, -1]: both relu 0 -> 0     K3 = [3, 0]:  6, but not visible
  const float q[] = {1, 0, 0, 1}, w[] = {2, -1};
  const float keys[] = {1, 1, -1, 2, -1, -1, 3, 0};
  const int64_t visible = 3;
  const int32_t cand[] = {2, 3, -1, 0, 2};  // a run crossing `visible`, none, a repeat
  for (const auto& v : variants(indexer_score)) {
    std::vector<float> score(4, kNaN);
    IndexerScoreParams p{.q = q,
                         .w = w,
                         .keys = keys,
                         .visible = &visible,
                         .score = score.data(),
                         .m = 1,
                         .heads = 2,
                         .dim = 2,
                         .rows = 4};
    v.run(p);
    EXPECT_EQ(score, (std::vector<float>{1, -2, 0, -kInf})) << v.name;
    std::fill(score.begin(), score.end(), kNaN);
    p.candidates = cand;
    p.max_candidates = 5;
    v.run(p);
    EXPECT_EQ(score, (std::vector<float>{1, -kInf, 0, -kInf})) << v.name;
  }
}

struct ScoreCase {
  int64_t m, heads, dim, rows, max_candidates;  // max_candidates 0: no candidate list
};

struct ScoreInputs {
  std::vector<float> q, w, keys;
  std::vector<int64_t> visible;
  std::vector<int32_t> cand;
};

// Random inputs where every third key row is the negated-|x| of a random row and
// every query is positive, so those rows' dots are all < 0 and score exactly 0.
ScoreInputs make_inputs(const ScoreCase& c, uint32_t seed) {
  ScoreInputs in;
  in.q = testing::random_normal(c.m * c.heads * c.dim, seed);
  for (float& x : in.q) x = std::fabs(x);
  in.w = testing::random_normal(c.m * c.heads, seed + 1);
  in.keys = testing::random_normal(c.rows * c.dim, seed + 2);
  for (int64_t j = 0; j < c.rows; j += 3)
    for (int64_t d = 0; d < c.dim; ++d)
      in.keys[j * c.dim + d] = -std::fabs(in.keys[j * c.dim + d]) - 0.01f;
  std::mt19937 rng(seed + 3);
  for (int64_t m = 0; m < c.m; ++m)  // 0, all rows, and in between
    in.visible.push_back(m == 0 ? c.rows : m == 1 ? 0 : int64_t(rng() % (c.rows + 1)));
  for (int64_t m = 0; m < c.m; ++m) {
    int64_t i = 0;
    while (i < c.max_candidates) {  // runs of consecutive rows, repeats, and -1 gaps;
      // the first run starts just below visible[m], so it crosses the visible edge
      const int32_t start = i == 0   ? int32_t(std::max<int64_t>(0, in.visible[m] - 2))
                            : c.rows ? int32_t(rng() % c.rows)
                                     : -1;
      for (int64_t r = 0; r < 1 + int64_t(rng() % 6) && i < c.max_candidates; ++r, ++i)
        in.cand.push_back(
            (i > 0 && rng() % 7 == 0) || start < 0 ? -1 : std::min<int32_t>(start + r, c.rows - 1));
    }
  }
  return in;
}

TEST_P(IndexerScoreFastPaths, MatchReference) {
  const ScoreCase cases[] = {{1, 1, 32, 1, 0},     {3, 4, 64, 17, 0},    {2, 17, 96, 300, 0},
                             {3, 32, 128, 300, 0}, {3, 4, 64, 300, 40},  {2, 32, 128, 1000, 64},
                             {4, 3, 32, 17, 17},   {1, 64, 128, 129, 0}, {3, 1, 33, 5, 3}};
  for (const ScoreCase& c : cases) {
    const ScoreInputs in = make_inputs(c, 51 + c.rows);
    IndexerScoreParams p{.q = in.q.data(),
                         .w = in.w.data(),
                         .keys = in.keys.data(),
                         .visible = in.visible.data(),
                         .candidates = c.max_candidates ? in.cand.data() : nullptr,
                         .max_candidates = c.max_candidates,
                         .m = c.m,
                         .heads = c.heads,
                         .dim = c.dim,
                         .rows = c.rows};
    std::vector<float> want(c.m * c.rows, kNaN);
    p.score = want.data();
    testing::run_ref(indexer_score, p);
    for (const auto& v : variants(indexer_score)) {
      std::vector<float> got(want.size(), kNaN);
      p.score = got.data();
      v.run(p);
      for (size_t i = 0; i < got.size(); ++i) {
        // -inf and the all-relu-zero rows are exact; the rest differ by rounding only.
        if (std::isinf(want[i]) || want[i] == 0) {
          ASSERT_EQ(got[i], want[i]) << v.name << " rows=" << c.rows << " i=" << i;
          continue;
        }
        ASSERT_TRUE(testing::close(got[i], want[i], 1e-4f, 1e-5f))
            << v.name << " heads=" << c.heads << " dim=" << c.dim << " rows=" << c.rows
            << " i=" << i << " got " << got[i] << " want " << want[i];
      }
    }
  }
}

TEST(IndexerScore, IndependentOfThreadCount) {
  const ScoreCase c{3, 32, 128, 1000, 0};
  const ScoreInputs in = make_inputs(c, 77);
  IndexerScoreParams p{.q = in.q.data(),
                       .w = in.w.data(),
                       .keys = in.keys.data(),
                       .visible = in.visible.data(),
                       .m = c.m,
                       .heads = c.heads,
                       .dim = c.dim,
                       .rows = c.rows};
  std::vector<float> one(c.m * c.rows), many(c.m * c.rows);
  const int saved = num_threads();
  set_num_threads(1);
  p.score = one.data();
  indexer_score(p);
  set_num_threads(3);
  p.score = many.data();
  indexer_score(p);
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * 4), 0);
}

TEST(IndexerScore, RejectsBadParams) {
  const float q[2] = {}, w[1] = {}, keys[4] = {};
  float score[2];
  const int64_t visible = 2, too_many = 3;
  const int32_t bad_cand[] = {2};
  const IndexerScoreParams ok{.q = q,
                              .w = w,
                              .keys = keys,
                              .visible = &visible,
                              .score = score,
                              .m = 1,
                              .heads = 1,
                              .dim = 2,
                              .rows = 2};
  indexer_score(ok);
  IndexerScoreParams p = ok;
  p.visible = &too_many;
  EXPECT_THROW(indexer_score(p), Error);
  p = ok;
  p.candidates = bad_cand;
  p.max_candidates = 1;
  EXPECT_THROW(indexer_score(p), Error);
  p = ok;
  p.w = nullptr;
  EXPECT_THROW(indexer_score(p), Error);
}

// The rank of MODEL.md §5.4 spelled out with std::stable_sort: indices ascending,
// then stably ordered by value descending, keeping only values > -inf.
std::vector<int32_t> stable_sort_topk(const std::vector<float>& s, int64_t k) {
  std::vector<int32_t> idx;
  for (size_t j = 0; j < s.size(); ++j)
    if (s[j] > -kInf) idx.push_back(int32_t(j));
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  idx.resize(std::min<size_t>(idx.size(), k));
  return idx;
}

std::vector<std::pair<std::string, Backend>> topk_backends() {
  return {{"ref", Backend::Ref}, {"cpu", Backend::Cpu}};
}

// Runs topk under a backend with a poisoned output buffer; checks the tail is untouched.
std::vector<int32_t> run_topk(Backend b, const std::vector<float>& s, int64_t k) {
  ScopedBackend scoped(b);
  std::vector<int32_t> out(k + 3, -7);
  const int64_t n = topk(s.data(), int64_t(s.size()), k, out.data());
  for (size_t i = n; i < out.size(); ++i) EXPECT_EQ(out[i], -7) << "wrote past the count";
  out.resize(n);
  return out;
}

TEST(TopK, HandWorkedTies) {
  const std::vector<float> s = {1, 3, 3, -kInf, 2, kInf, 3, kNaN, kInf};
  for (const auto& [name, b] : topk_backends()) {
    EXPECT_EQ(run_topk(b, s, 4), (std::vector<int32_t>{5, 8, 1, 2})) << name;
    EXPECT_EQ(run_topk(b, s, 100), (std::vector<int32_t>{5, 8, 1, 2, 6, 4, 0})) << name;
    EXPECT_EQ(run_topk(b, s, 0), (std::vector<int32_t>{})) << name;
    // -0 and +0 are equal values: ranked by index, not by sign.
    EXPECT_EQ(run_topk(b, {-0.0f, 0.0f, -0.0f, -1.0f, 1.0f}, 3), (std::vector<int32_t>{4, 0, 1}))
        << name;
    EXPECT_EQ(run_topk(b, std::vector<float>(1000, 0.0f), 16).back(), 15) << name;
    EXPECT_EQ(run_topk(b, std::vector<float>(50, -kInf), 16), (std::vector<int32_t>{})) << name;
  }
}

// Tie-heavy score arrays: small value sets, all equal, one narrow bucket, ±inf.
std::vector<float> tie_heavy(int64_t n, int kind, std::mt19937& rng) {
  std::vector<float> s(n);
  for (float& x : s) {
    const uint32_t r = rng();
    switch (kind) {
      case 0:
        x = float(int(r % 5) - 2);
        break;  // {-2..2}
      case 1:
        x = 0.0f;
        break;  // all equal
      case 2:
        x = 1.0f + float(r % 64) * 1e-7f;
        break;  // one 12-bit bucket
      case 3:
        x = r % 3 == 0 ? -kInf : r % 17 == 0 ? kInf : (r % 2 ? 0.0f : -0.0f);
        break;
      default:
        x = std::ldexp(float(r % 1000) - 500, -int(r % 40));
        break;  // wide range
    }
  }
  return s;
}

TEST(TopK, MatchesStableSortReference) {
  std::mt19937 rng(99);
  const int64_t sizes[] = {1, 3, 17, 33, 1000, 100000, 1 << 20};
  const int64_t ks[] = {1, 16, 512, 2048};
  for (int64_t n : sizes)
    for (int kind = 0; kind < 5; ++kind) {
      const auto s = tie_heavy(n, kind, rng);
      for (int64_t k : ks) {
        if (n >= 100000 && k < 2048) continue;  // keep the big cases few
        const auto want = stable_sort_topk(s, k);
        for (const auto& [name, b] : topk_backends())
          ASSERT_EQ(run_topk(b, s, k), want)
              << name << " n=" << n << " kind=" << kind << " k=" << k;
      }
      if (n <= 1000) {  // k beyond the count: everything finite, fully ranked
        ASSERT_EQ(run_topk(Backend::Cpu, s, n + 5), stable_sort_topk(s, n + 5)) << "n=" << n;
      }
    }
}

TEST(TopK, ScoresFromTheIndexer) {
  // End to end on real scores with exact-0 rows: cpu scores + cpu top-k equal the
  // stable-sort rank of the reference scores (the ties are exact in both).
  const ScoreCase c{1, 4, 64, 3000, 0};
  const ScoreInputs in = make_inputs(c, 123);
  IndexerScoreParams p{.q = in.q.data(),
                       .w = in.w.data(),
                       .keys = in.keys.data(),
                       .visible = in.visible.data(),
                       .m = 1,
                       .heads = c.heads,
                       .dim = c.dim,
                       .rows = c.rows};
  std::vector<float> s(c.rows);
  p.score = s.data();
  testing::run_ref(indexer_score, p);
  const auto want = stable_sort_topk(s, 2048);
  ASSERT_GT(std::count(s.begin(), s.end(), 0.0f), 900);  // the tie-heavy part is present
  EXPECT_EQ(run_topk(Backend::Cpu, s, 2048), want);
}

TEST(TopK, RejectsBadParams) {
  const float s[2] = {1, 2};
  int32_t out[2];
  EXPECT_THROW(topk(s, -1, 1, out), Error);
  EXPECT_THROW(topk(s, 2, -1, out), Error);
  EXPECT_THROW(topk(nullptr, 2, 1, out), Error);
  EXPECT_EQ(topk(nullptr, 0, 1, nullptr), 0);
}

INSTANTIATE_TEST_SUITE_P(Impls, IndexerScoreHandWorked, testing::impls_and_ref(),
                         testing::impl_name);
INSTANTIATE_TEST_SUITE_P(Impls, IndexerScoreFastPaths, testing::fast_impls(), testing::impl_name);

}  // namespace
}  // namespace troupe::kernels
