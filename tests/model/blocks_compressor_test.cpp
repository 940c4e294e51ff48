// The Full-layer compressor (MODEL.md §5.3) checked in isolation against a plain
// reference: layer 1 (ratio 2, softmax-gated pooling of each group) and layer 6
// (ratio 1), fed in two calls so one ratio-2 group is split across them (the carry),
// with a second sequence in the second call. What is compared is what the state holds:
// the packed nvfp4 KV rows and mxfp4 index keys (decoded with model/kv_rows.h) and the
// f32 carry of the open group.
// Tolerances: carry relative L2 1e-5; decoded rows equal element for element, except
// where the reference flags a value as within rounding reach of a midpoint
// (block_ref.h QuantRow: f32 may round it either way).
#include <gtest/gtest.h>

#include "model/csa.h"
#include "model/state.h"
#include "support/csa_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;

struct Fed {
  model::SequenceState state;
  std::vector<float> x;  // attention inputs of every position fed so far [n, H]
};

// Feeds one call: for each sequence, `n` new tokens whose inputs are drawn from `seed`.
void feed(const model::ModelConfig& c, int64_t layer, const std::vector<double>& freqs,
          std::vector<Fed*> seqs, std::vector<int64_t> n, uint32_t seed) {
  const int64_t H = c.hidden_size;
  std::vector<SeqChunk> chunks;
  std::vector<float> x;
  for (size_t i = 0; i < seqs.size(); ++i) {
    chunks.push_back({&seqs[i]->state, token_run(n[i], static_cast<int32_t>(seed + i))});
    const std::vector<float> xi = random_floats(n[i] * H, seed * 10 + i);
    x.insert(x.end(), xi.begin(), xi.end());
    seqs[i]->x.insert(seqs[i]->x.end(), xi.begin(), xi.end());
  }
  const model::Batch b = make_batch(chunks);
  const model::LayerContext ctx{c, golden_model().weights.layers[layer].attn, layer, freqs, b};
  model::run_compressor(ctx, x.data());
  for (const SeqChunk& ch : chunks) ch.state->advance(ch.tokens);
}

// Every row the state holds for `layer`, and its carry, against the reference.
void check_state(const model::ModelConfig& c, int64_t layer, const CsaLayerRef& want, Fed& f) {
  const int64_t r = c.ratio(layer), n = f.state.length(), D = c.head_dim;
  ASSERT_EQ(f.state.compressed_rows(layer), n / r);
  const model::KvRowLayout& layout = f.state.layout;
  std::vector<float> ckv(layout.ckv.dim), ikey(layout.ikey.dim);
  for (int64_t g = 0; g < n / r; ++g) {
    const CsaLayerRef::GroupRows rows = want.compress(f.x.data(), g);
    layout.ckv.decode(f.state.ckv_row(layer, g), ckv.data());
    layout.ikey.decode(f.state.ikey_row(layer, g), ikey.data());
    EXPECT_EQ(real_mismatches(ckv.data(), rows.ckv), 0) << "KV row " << g;
    EXPECT_EQ(real_mismatches(ikey.data(), rows.ikey), 0) << "index key " << g;
  }
  const int64_t open = r > 1 ? n % r : 0;
  ASSERT_EQ(static_cast<int64_t>(f.state.carry_v(layer).size()), open * D);
  ASSERT_EQ(static_cast<int64_t>(f.state.carry_s(layer).size()), open * D);
  for (int64_t k = 0; k < open; ++k) {
    const float* xk = &f.x[(n - open + k) * c.hidden_size];
    EXPECT_LT(rel_l2(&f.state.carry_v(layer)[k * D], want.carry_v(xk)), 1e-5) << "carry v " << k;
    EXPECT_LT(rel_l2(&f.state.carry_s(layer)[k * D], want.carry_s(xk)), 1e-5) << "carry s " << k;
  }
}

TEST(BlocksCompressor, RatioTwoGroupSplitAcrossCalls) {
  const auto& g = golden_model();
  const auto& c = g.config;
  const int64_t layer = 1;
  ASSERT_EQ(c.ratio(layer), 2);
  ASSERT_EQ(c.layer_mode[layer], model::LayerMode::Full);
  const CsaLayerRef want(c, g.weights.layers[layer].attn, layer);
  const std::vector<double> freqs = engine_freqs(c, layer);
  Fed a{model::SequenceState::empty(c), {}}, b{model::SequenceState::empty(c), {}};
  feed(c, layer, freqs, {&a}, {5}, 1);  // groups 0, 1 complete; token 4 carried
  {
    SCOPED_TRACE("after the first call");
    check_state(c, layer, want, a);
  }
  feed(c, layer, freqs, {&a, &b}, {6, 3}, 2);  // a: group 2 = tokens 4 | 5, ..., token 10 open
  SCOPED_TRACE("after the second call");
  check_state(c, layer, want, a);
  check_state(c, layer, want, b);
  EXPECT_EQ(a.state.compressed_rows(layer), 5);
}

TEST(BlocksCompressor, RatioOneEmitsEveryToken) {
  const auto& g = golden_model();
  const auto& c = g.config;
  const int64_t layer = 6;
  ASSERT_EQ(c.ratio(layer), 1);
  ASSERT_EQ(c.layer_mode[layer], model::LayerMode::Full);
  const CsaLayerRef want(c, g.weights.layers[layer].attn, layer);
  const std::vector<double> freqs = engine_freqs(c, layer);
  Fed a{model::SequenceState::empty(c), {}}, b{model::SequenceState::empty(c), {}};
  feed(c, layer, freqs, {&a}, {5}, 3);
  feed(c, layer, freqs, {&a, &b}, {1, 17}, 4);
  check_state(c, layer, want, a);
  check_state(c, layer, want, b);
}

}  // namespace
}  // namespace troupe::testing
