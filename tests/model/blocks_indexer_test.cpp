// The CSA2 indexer (MODEL.md §5.4) checked in isolation against a plain reference:
// layer 1 (Full, plain top-K), layer 6 (= cs: hierarchical level 1, candidate blocks)
// and layer 8 (Reindex over layer 6's keys: level 2, scoring only the candidates).
// The index keys are put into the state directly, built so that exact ties are common
// at the top-K and top-Kb boundaries (all-zero blocks and rows score exactly 0, copied
// rows score equal), and the test checks that such boundary ties really occur.
// Two sequences share the batch: one deep (rows beyond an early query's visibility are
// in the state), one starting at position 0 (nothing or little visible).
// Tolerances: scores relative L2 1e-5 over the visible entries (1e-3 for a query row
// whose mxfp4 query the reference flags as within rounding reach of a midpoint, where
// f32 may round one element to the neighbouring grid point); the −inf pattern exact;
// selections and candidate rows exact (the built-in ties do not depend on the query).
#include <gtest/gtest.h>

#include <map>

#include "kernels/dispatch.h"
#include "model/csa.h"
#include "model/state.h"
#include "support/csa_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;

// n index keys [n, dI] in blocks of Bc: ~55% of blocks all zero; in the others a row is
// zero (25%), a copy of an earlier non-zero row (15%) or fresh N(0, 1).
std::vector<std::vector<float>> tie_keys(int64_t n, int64_t dI, int64_t Bc, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<float>> keys;
  std::vector<int64_t> nonzero;
  bool zero_block = false;
  for (int64_t j = 0; j < n; ++j) {
    if (j % Bc == 0) zero_block = u(rng) < 0.55;
    const double pick = u(rng);
    if (zero_block || pick < 0.25) {
      keys.emplace_back(dI, 0.0f);
    } else if (pick < 0.4 && !nonzero.empty()) {
      keys.push_back(keys[nonzero[static_cast<size_t>(u(rng) * nonzero.size())]]);
    } else {
      keys.push_back(random_floats(dI, seed * 1000 + static_cast<uint32_t>(j)));
      nonzero.push_back(j);
    }
  }
  return keys;
}

struct Sequence {
  model::SequenceState state;
  std::map<int64_t, std::vector<DVec>> keys;  // source layer -> decoded index keys
};

// A state of length P holding `rows[src]` index keys of each source layer.
Sequence make_sequence(const model::ModelConfig& c, int64_t P, std::map<int64_t, int64_t> rows,
                       uint32_t seed) {
  Sequence s{model::SequenceState::empty(c), {}};
  s.state.advance(token_run(P, 3));
  const model::KvRowLayout& layout = s.state.layout;
  std::vector<uint8_t> ckv(layout.ckv.bytes(), 0), ikey(layout.ikey.bytes());
  std::vector<float> decoded(layout.ikey.dim);
  for (auto [src, n] : rows)
    for (const auto& k : tie_keys(n, layout.ikey.dim, c.candidate_block_size, seed + src)) {
      layout.ikey.encode(k.data(), ikey.data());
      layout.ikey.decode(ikey.data(), decoded.data());
      s.state.append_row(src, ckv.data(), ikey.data());
      s.keys[src].push_back(to_double(decoded.data(), layout.ikey.dim));
    }
  return s;
}

struct Ties {
  int64_t at_top_k = 0;   // query rows where the K-th and (K+1)-th scores are equal
  int64_t at_top_kb = 0;  // level-1 rows where the Kb-th and (Kb+1)-th block maxima are equal
};

// K-th and (K+1)-th ranked values equal and finite: the boundary is decided by the tie rule.
bool boundary_tie(const DVec& v, int64_t K) {
  const std::vector<int64_t> order = rank_desc(v);
  return static_cast<int64_t>(v.size()) > K && v[order[K - 1]] == v[order[K]] &&
         v[order[K]] > -kInfD;
}

DVec block_maxima(const DVec& score, int64_t visible, int64_t Bc) {
  DVec b((score.size() + Bc - 1) / Bc, -kInfD);
  for (int64_t j = 0; j < visible; ++j) b[j / Bc] = std::max(b[j / Bc], score[j]);
  if (visible > 0) b[(visible - 1) / Bc] = kInfD;
  return b;
}

class IndexerCase {
 public:
  IndexerCase()
      : c_(golden_model().config),
        seqs_{make_sequence(c_, 60, {{1, 33}, {6, 67}}, 10),
              make_sequence(c_, 0, {{1, 3}, {6, 6}}, 20)},
        batch_(
            make_batch({{&seqs_[0].state, token_run(7, 1)}, {&seqs_[1].state, token_run(6, 2)}})),
        sel_(c_.num_hidden_layers) {
    batch_.trace = &trace_;
  }

  // Runs layer `layer`'s indexer (engine, then reference) on fresh random x and ql.
  void run(int64_t layer, Ties& ties) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const auto& w = golden_model().weights.layers[layer].attn;
    const std::vector<float> x = random_floats(batch_.rows * c_.hidden_size, 100 + layer);
    const std::vector<float> ql = random_floats(batch_.rows * c_.q_lora_rank, 200 + layer);
    const std::vector<double> freqs = engine_freqs(c_, layer);
    model::run_indexer({c_, w, layer, freqs, batch_}, x.data(), ql.data(), sel_);

    const CsaLayerRef want(c_, w, layer);
    const int64_t src = c_.kv_source[layer], cs = c_.candidate_source_layer_id;
    const int64_t K = c_.index_topk, Kb = c_.candidate_topk_blocks, Bc = c_.candidate_block_size;
    for (int64_t r = 0; r < batch_.rows; ++r) {
      const int64_t p = batch_.pos[r];
      SCOPED_TRACE("row " + std::to_string(r) + ", position " + std::to_string(p));
      const std::vector<DVec>& keys = seqs_[batch_.seq[r]].keys.at(src);
      const DVec ql_r = to_double(&ql[r * c_.q_lora_rank], c_.q_lora_rank);
      const std::vector<int64_t>* cand = layer > cs ? &cand_.at(r) : nullptr;
      bool qi_ambiguous = false;
      const DVec score =
          want.index_scores(&x[r * c_.hidden_size], ql_r, p, keys, cand, &qi_ambiguous);
      compare_scores(scores_.at({layer, r}), score, qi_ambiguous ? 1e-3 : 1e-5);
      const auto& got = sel_.sel[layer][r];
      std::vector<int64_t> got_sorted(got.begin(), got.end());
      std::sort(got_sorted.begin(), got_sorted.end());
      EXPECT_EQ(got_sorted, ref_top_k(score, K)) << "selection";
      ties.at_top_k += boundary_tie(score, K);
      if (layer != cs) continue;
      const int64_t visible = (p + 1) / c_.ratio(layer);
      cand_[r] = ref_candidates(score, visible, Bc, Kb);
      EXPECT_EQ(std::vector<int64_t>(sel_.cand[r].begin(), sel_.cand[r].end()), cand_[r])
          << "candidate rows";
      ties.at_top_kb += boundary_tie(block_maxima(score, visible, Bc), Kb);
    }
  }

 private:
  static void compare_scores(const std::vector<float>& got, const DVec& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    DVec g, w;
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_EQ(std::isinf(got[j]), std::isinf(want[j])) << "score " << j;
      if (!std::isinf(want[j]) && !std::isinf(got[j])) g.push_back(got[j]), w.push_back(want[j]);
    }
    EXPECT_LT(rel_l2(g, w), tol) << "finite scores";
  }

  const model::ModelConfig& c_;
  std::vector<Sequence> seqs_;
  model::Batch batch_;
  model::Selections sel_;
  std::map<int64_t, std::vector<int64_t>> cand_;                      // query row -> level-1 rows
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> scores_;  // (layer, row) -> engine
  model::TraceFn trace_ = [this](const std::string& name, int64_t layer, int64_t row,
                                 std::span<const float> v) {
    if (name == "index_score") scores_[{layer, row}].assign(v.begin(), v.end());
  };
};

TEST(BlocksIndexer, FullLayerOneSelectsTopK) {
  const auto& c = golden_model().config;
  ASSERT_EQ(c.layer_mode[1], model::LayerMode::Full);
  ASSERT_LT(1, c.candidate_source_layer_id);
  IndexerCase t;
  Ties ties;
  t.run(1, ties);
  EXPECT_GT(ties.at_top_k, 0) << "no query row had a tie at the top-K boundary";
}

TEST(BlocksIndexer, HierarchicalLevelsOneAndTwo) {
  const auto& c = golden_model().config;
  ASSERT_EQ(c.candidate_source_layer_id, 6);
  ASSERT_EQ(c.layer_mode[8], model::LayerMode::Reindex);
  ASSERT_EQ(c.kv_source[8], 6);
  IndexerCase t;
  Ties level1, level2;
  t.run(6, level1);
  t.run(8, level2);
  EXPECT_GT(level1.at_top_kb, 0) << "no tie at the candidate-block boundary";
  EXPECT_GT(level1.at_top_k, 0) << "no tie at the level-1 top-K boundary";
  EXPECT_GT(level2.at_top_k, 0) << "no tie at the level-2 top-K boundary";
}

TEST(BlocksIndexer, ScalarKernelBackend) {
  // All three levels through the kernels' scalar Ref backend instead of the Cpu one.
  kernels::ScopedBackend scalar(kernels::Backend::Ref);
  IndexerCase t;
  Ties ties;
  t.run(1, ties);
  t.run(6, ties);
  t.run(8, ties);
}

}  // namespace
}  // namespace troupe::testing
