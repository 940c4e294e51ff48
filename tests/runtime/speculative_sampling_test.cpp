// Speculative sampling keeps the target distribution (docs/model-notes.md, "Speculative
// sampling"): over many seeds, the histogram of the tokens the speculative engine emits at
// output positions 1..3 matches plain sampling's over other seeds (two-sample chi-square,
// alpha 1e-3), while the drafts are often accepted. The same threshold rejects the biased
// rule that always accepts the draft, so the test can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kernels/sampling.h"
#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "runtime/speculative/oracle_drafter.h"
#include "support/golden.h"
#include "support/plain_forward.h"

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::golden_model;
using testing::random_tokens;

constexpr int64_t kSeeds = 400, kOutput = 4, kPositions = 3;  // positions 1..3

using Histogram = std::map<int32_t, int64_t>;  // token -> count

// Two-sample chi-square statistic and its degrees of freedom: tokens seen >= 10 times
// in both samples together are bins of their own, the rest share one bin.
std::pair<double, int64_t> chi_square(const Histogram& a, const Histogram& b) {
  int64_t na = 0, nb = 0;
  for (const auto& [t, n] : a) na += n;
  for (const auto& [t, n] : b) nb += n;
  std::map<int32_t, std::pair<int64_t, int64_t>> bins;
  for (const auto& [t, n] : a) bins[t].first += n;
  for (const auto& [t, n] : b) bins[t].second += n;
  std::pair<int64_t, int64_t> rest{0, 0};
  std::vector<std::pair<int64_t, int64_t>> kept;
  for (const auto& [t, ab] : bins) {
    if (ab.first + ab.second >= 10) {
      kept.push_back(ab);
    } else {
      rest.first += ab.first;
      rest.second += ab.second;
    }
  }
  if (rest.first + rest.second > 0) kept.push_back(rest);
  const double ka = std::sqrt(double(nb) / double(na)), kb = std::sqrt(double(na) / double(nb));
  double chi2 = 0;
  for (const auto& [x, y] : kept) chi2 += std::pow(ka * double(x) - kb * double(y), 2) / double(x + y);
  return {chi2, static_cast<int64_t>(kept.size()) - 1};
}

// The chi-square quantile at 1 - 1e-3 (Wilson-Hilferty; z = 3.09).
double critical_value(int64_t df) {
  const double d = double(std::max<int64_t>(df, 1)), h = 2.0 / (9.0 * d);
  return d * std::pow(1.0 - h + 3.09 * std::sqrt(h), 3);
}

struct Sampled {
  std::vector<Histogram> at;  // [kPositions] histogram of output token 1 + i
  EngineFigures figures;
};

const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> p = random_tokens(12, 77);
  return p;
}

kernels::SamplingParams sampling(uint64_t seed) {
  kernels::SamplingParams s;
  s.temperature = 0.05f;  // the tiny model is flat: at 0.05 a greedy draft is drawn ~1 in 3
  s.seed = seed;
  return s;
}

Sampled sample_many(uint64_t first_seed, const Drafter* drafter) {
  EngineConfig c = golden_engine_config(int64_t(256) << 20, /*async=*/true, 1024, 64);
  if (drafter != nullptr) {
    c.speculative.method = "oracle";
    c.speculative.num_speculative_tokens = 3;
  }
  Engine e(*golden_draft().forward, nullptr, c, drafter);
  for (int64_t i = 0; i < kSeeds; ++i) {
    RequestParams p = greedy(kOutput);
    p.sampling = sampling(first_seed + uint64_t(i));
    e.add_request(i, prompt(), p);
  }
  std::map<RequestId, std::vector<int32_t>> out;
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step())
      out[o.id].insert(out[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
  Sampled s;
  s.at.resize(kPositions);
  for (const auto& [id, t] : out) {
    EXPECT_EQ(static_cast<int64_t>(t.size()), kOutput);
    for (int64_t i = 0; i < kPositions && i + 1 < static_cast<int64_t>(t.size()); ++i) s.at[i][t[i + 1]]++;
  }
  s.figures = e.figures();
  return s;
}

TEST(SpeculativeSampling, EmittedTokensHaveTheTargetDistribution) {
  // Drafts: the prompt's greedy continuation (TEST-ONLY oracle, every token offered).
  const std::vector<int32_t> greedy_tokens = testing::plain_greedy(prompt(), kOutput + 1).tokens;
  std::vector<int32_t> seq = prompt();
  seq.insert(seq.end(), greedy_tokens.begin(), greedy_tokens.end());
  OracleDrafter drafter(1.0, golden_model().config.vocab_size);
  for (RequestId id = 0; id < kSeeds; ++id) drafter.set_sequence(id, seq);

  const Sampled spec = sample_many(1, &drafter);
  const Sampled plain = sample_many(100'000, nullptr);
  // The accept path runs: a good share of the drafts is drawn.
  EXPECT_GT(spec.figures.spec_num_accepted_tokens, spec.figures.spec_num_draft_tokens / 5);
  for (int64_t i = 0; i < kPositions; ++i) {
    SCOPED_TRACE("output position " + std::to_string(i + 1));
    const auto [chi2, df] = chi_square(spec.at[i], plain.at[i]);
    EXPECT_LT(chi2, critical_value(df)) << "df " << df;
    // Always accepting would emit the draft (the greedy token) at every position.
    Histogram biased{{greedy_tokens[i + 1], kSeeds}};
    const auto [chi2_biased, df_biased] = chi_square(biased, plain.at[i]);
    EXPECT_GT(chi2_biased, critical_value(df_biased)) << "df " << df_biased;
  }
}

}  // namespace
}  // namespace troupe::runtime
