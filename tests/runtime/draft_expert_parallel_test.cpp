// The DSpark draft's MoE expert-parallel (DEP-R): each rank drafts its own requests in one
// batch (DsparkDraft::propose_batch) and the draft's routed experts run on the ranks that
// hold them, through the same ExpertParallel exchange as the target's, on the draft's own
// placement. Against the one-query, all-experts-here DsparkDraft::propose on the golden
// draft: the drafts and every confidence bit for bit, for R = 1, 2, 3 (33 % 3 != 0 slots
// of 8 experts: padded), with a rank that drafts nothing; each rank holds only its slots'
// draft expert weights. And the one-rank batch (DraftBatch) against the same.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>

#include "runtime/dep/expert_parallel.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/eplb/static_placement.h"
#include "runtime/speculative/dspark_drafter.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::random_tokens;

// Requests with their feature rings after a prefill, and the draft query after each.
struct Prefilled {
  std::vector<model::SequenceState> states;
  std::vector<model::DraftInput> queries;
};

const Prefilled& prefilled() {
  static const Prefilled p = [] {
    const auto& d = golden_draft();
    const int64_t lengths[] = {9, 23, 4, 40, 15};
    Prefilled out;
    out.states.reserve(std::size(lengths));
    for (size_t i = 0; i < std::size(lengths); ++i) {
      const std::vector<int32_t> prompt = random_tokens(lengths[i], 300 + static_cast<int>(i));
      out.states.push_back(model::SequenceState::empty(d.draft->config()));
      model::SequenceState& st = out.states.back();
      st.enable_features(d.draft->config());
      model::SequenceInput in{&st, prompt};
      std::vector<model::SequenceInput> batch{in};
      d.forward->run(batch);
      // k = 0..3 in turn: every draft length; the bonus a token of the prompt's.
      out.queries.push_back({&*st.feature_ring, lengths[i] - 1, prompt.back(), prompt[0],
                             static_cast<int64_t>(i % 4)});
    }
    return out;
  }();
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct RankRun {
  std::map<size_t, model::DraftProposal> proposals;  // by query index
  std::vector<int64_t> counts;                       // [S, nEd] picks it routed
  int64_t weight_bytes = 0;                          // its copy of its slots' experts
};

// Rank r of R drafts queries r, r + R, ... of those below `busy` ranks' share: rank
// busy..R-1 draft nothing and join each exchange with zero rows.
std::vector<RankRun> run_ranks(int R, int busy, int64_t redundant) {
  const auto& d = golden_draft();
  const model::ModelConfig& c = d.draft->config();
  const model::MoeLayers layers = model::draft_moe_layers(d.weights);
  auto placement = std::make_shared<const eplb::ExpertPlacement>(eplb::ep_default_placement(
      static_cast<int64_t>(layers.size()), c.dspark_n_routed_experts, R, redundant));
  InProcessGroup group(R);
  std::vector<RankRun> runs(R);
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r)
    threads.emplace_back([&, r] {
      ExpertParallel experts(group.communicator(r), placement, layers);
      std::vector<model::DraftInput> mine;
      std::vector<size_t> index;
      for (size_t i = r; r < busy && i < prefilled().queries.size(); i += busy) {
        mine.push_back(prefilled().queries[i]);
        index.push_back(i);
      }
      std::vector<model::DraftProposal> out(mine.size());
      experts.begin_step();
      d.draft->propose_batch(mine, out, experts);
      for (size_t k = 0; k < mine.size(); ++k) runs[r].proposals[index[k]] = out[k];
      runs[r].counts = experts.take_counts();
      runs[r].weight_bytes = experts.slot_weights()->bytes();
    });
  for (std::thread& t : threads) t.join();
  return runs;
}

int64_t expert_bytes(const kernels::ExpertWeights& e) {
  int64_t b = 0;
  for (const auto* v : {&e.w1, &e.w3, &e.w2}) b += kernels::data_bytes(*v) + kernels::scale_bytes(*v);
  return b;
}

class DraftExpertParallel : public ::testing::TestWithParam<int> {};

TEST_P(DraftExpertParallel, DraftsAndConfidencesEqualTheOneQueryLocalDraftBitForBit) {
  const int R = GetParam();
  const auto& d = golden_draft();
  const model::ModelConfig& c = d.draft->config();
  const std::vector<RankRun> runs = run_ranks(R, /*busy=*/R == 1 ? 1 : R - 1, /*redundant=*/1);
  std::map<size_t, model::DraftProposal> got;
  for (const RankRun& r : runs) got.insert(r.proposals.begin(), r.proposals.end());
  if (R > 1) {
    EXPECT_TRUE(runs.back().proposals.empty());  // the idle rank
  }
  const auto& queries = prefilled().queries;
  ASSERT_EQ(got.size(), queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    SCOPED_TRACE("query " + std::to_string(i));
    const model::DraftInput& q = queries[i];
    const model::DraftProposal want =
        d.draft->propose(*q.features, q.anchor, q.anchor_token, q.bonus, q.k);
    EXPECT_EQ(got[i].tokens, want.tokens);
    EXPECT_EQ(static_cast<int64_t>(want.confidence.size()), q.k + 1);
    EXPECT_TRUE(same_bits(got[i].confidence, want.confidence));
  }
  // Every query routed Bs slots x top-k picks in each draft layer, counted on its rank.
  const int64_t S = c.num_nextn_predict_layers, E = c.dspark_n_routed_experts;
  for (int64_t l = 0; l < S; ++l) {
    int64_t picks = 0;
    for (const RankRun& r : runs)
      for (int64_t e = 0; e < E; ++e) picks += r.counts.at(l * E + e);
    EXPECT_EQ(picks, static_cast<int64_t>(queries.size()) * c.dspark_block_size * c.dspark_top_k);
  }
}

// Each rank's copy holds its slots' draft experts only: their bytes, about 1/R of them all.
TEST_P(DraftExpertParallel, EachRankHoldsOnlyItsSlotsDraftExpertWeights) {
  const int R = GetParam();
  const auto& d = golden_draft();
  const model::ModelConfig& c = d.draft->config();
  const int64_t redundant = 1;
  const auto placement = eplb::ep_default_placement(c.num_nextn_predict_layers,
                                                    c.dspark_n_routed_experts, R, redundant);
  const std::vector<RankRun> runs = run_ranks(R, R, redundant);
  const int64_t S = placement.num_physical / R;
  int64_t all = 0;
  for (const auto& stage : d.weights.stages)
    for (const kernels::ExpertWeights& e : stage.ffn.experts) all += expert_bytes(e);
  for (int r = 0; r < R; ++r) {
    int64_t want = 0;
    for (int64_t l = 0; l < placement.num_layers; ++l)
      for (int64_t s = 0; s < S; ++s)
        want += expert_bytes(d.weights.stages[l].ffn.experts[placement.logical_of(l, r * S + s)]);
    EXPECT_EQ(runs[r].weight_bytes, want) << "rank " << r;
    // 8 experts + 1 redundant, padded to a multiple of R: S slots of the 8 per layer.
    EXPECT_EQ(runs[r].weight_bytes * c.dspark_n_routed_experts, all * S) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DraftExpertParallel, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "R" + std::to_string(info.param); });

// One rank without expert parallelism: the executor drafts a step's requests as one batch
// with every draft expert here (DsparkDraft::propose_batch without an exchange; the
// engine's DsparkDrafter::propose_all), the draft attention's projections over every
// query's rows at once and each query's keys apart (contexts of 4 to 16 rows here). The
// same bits as each query's own propose().
TEST(DraftBatch, ALocalBatchEqualsEachQuerysOwnDraftBitForBit) {
  const auto& d = golden_draft();
  const auto& queries = prefilled().queries;
  std::vector<model::DraftProposal> got(queries.size());
  d.draft->propose_batch(queries, got);
  const DsparkDrafter drafter(*d.draft);
  std::vector<DraftQuery> engine_queries;
  for (const model::DraftInput& q : queries)
    engine_queries.push_back({0, q.anchor, q.anchor_token, q.bonus, q.k, q.features});
  std::vector<std::vector<int32_t>> appended(queries.size(), std::vector<int32_t>{-7});  // kept in front
  std::vector<std::vector<int32_t>*> out;
  for (auto& v : appended) out.push_back(&v);
  drafter.propose_all(engine_queries, out);
  for (size_t i = 0; i < queries.size(); ++i) {
    SCOPED_TRACE("query " + std::to_string(i));
    const model::DraftInput& q = queries[i];
    const model::DraftProposal want = d.draft->propose(*q.features, q.anchor, q.anchor_token, q.bonus, q.k);
    EXPECT_EQ(got[i].tokens, want.tokens);
    EXPECT_TRUE(same_bits(got[i].confidence, want.confidence));
    std::vector<int32_t> expected{-7};
    expected.insert(expected.end(), want.tokens.begin(), want.tokens.end());
    EXPECT_EQ(appended[i], expected);
  }
}

}  // namespace
}  // namespace troupe::runtime
