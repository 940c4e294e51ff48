// attention_layer (MODEL.md §5.3) checked in isolation against a plain reference over a
// multi-step state: an SWA layer (0), Full layers (1: ratio 2; 6: ratio 1, = cs) that run
// their own compressor and indexer inside the call, and a Reuse layer (2) whose selection
// and source rows the test supplies. Two sequences are fed in three steps each, so
// queries read window rows from the ring (earlier steps) and from the chunk, selected
// compressed rows, the sink, then inverse rope, grouped wo_a and wo_b.
// The reference recomputes every window row and compressed row from the inputs of all
// positions, then checks the rows the engine stored (ring, compressed rows) against them
// element for element. Where the reference flags a value as within rounding reach of a
// midpoint (block_ref.h QuantRow) the engine's f32 rounding may differ; the reference
// then adopts the stored value, so one legitimate rounding flip does not blur the
// attention comparison. Steps are at most W tokens, so every new window row is in the
// ring afterwards and can be checked.
// Tolerances: output relative L2 1e-5 per query row; stored rows and Full-layer
// selections exact.
#include <gtest/gtest.h>

#include "kernels/dispatch.h"
#include "model/csa.h"
#include "model/state.h"
#include "support/csa_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;

// One sequence: the engine's state and everything the reference needs to rebuild it.
struct Track {
  model::SequenceState st;
  std::vector<float> x;                        // [n, H] attention inputs of every position so far
  std::vector<QuantRow> window;                // reference window rows, by position
  std::vector<CsaLayerRef::GroupRows> groups;  // Full: reference compressed rows, by group
  std::vector<DVec> source_rows;               // Reuse: decoded rows given to the source layer
};

class AttentionCase {
 public:
  // sink_stddev > 0 replaces the checkpoint's attn_sink (all 0 in the golden init) by
  // random values, so a sink entering with the wrong sign or scale shows.
  AttentionCase(int64_t layer, float sink_stddev)
      : c_(golden_model().config),
        layer_(layer),
        mode_(c_.layer_mode[layer]),
        w_(with_sink(golden_model().weights.layers[layer].attn, sink_stddev)),
        want_(c_, w_, layer),
        freqs_(engine_freqs(c_, layer)),
        rng_(layer) {}

  // One step: `m[i]` new tokens for sequence i, then engine vs reference per query.
  void step(std::vector<Track>& seqs, const std::vector<int64_t>& m) {
    const int64_t H = c_.hidden_size;
    std::vector<SeqChunk> chunks;
    std::vector<float> x;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<float> xi = random_floats(m[i] * H, rng_());
      x.insert(x.end(), xi.begin(), xi.end());
      seqs[i].x.insert(seqs[i].x.end(), xi.begin(), xi.end());
      if (mode_ == model::LayerMode::Reuse) give_source_rows(seqs[i], seqs[i].st.length() + m[i]);
      chunks.push_back({&seqs[i].st, token_run(m[i], static_cast<int32_t>(i))});
    }
    const model::Batch b = make_batch(chunks);
    model::Selections sel(c_.num_hidden_layers);
    if (mode_ == model::LayerMode::Reuse) pick_for_reuse(b, sel);
    std::vector<float> out(b.rows * H, std::numeric_limits<float>::quiet_NaN());
    model::attention_layer({c_, w_, layer_, freqs_, b}, x.data(), b, x.data(), sel, out.data());

    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_LE(m[i], c_.sliding_window);
      const int64_t groups_before = static_cast<int64_t>(seqs[i].groups.size());
      extend_reference(seqs[i]);
      check_stored_rows(seqs[i], seqs[i].st.length(), groups_before);
    }
    for (int64_t r = 0; r < b.rows; ++r) {
      Track& t = seqs[b.seq[r]];
      const int64_t p = b.pos[r];
      SCOPED_TRACE("sequence " + std::to_string(b.seq[r]) + ", position " + std::to_string(p));
      const DVec want = reference_row(t, p, sel, r);
      EXPECT_LT(rel_l2(&out[r * H], want), 1e-5);
    }
    for (const SeqChunk& ch : chunks) ch.state->advance(ch.tokens);
  }

 private:
  static model::AttentionWeights with_sink(model::AttentionWeights w, float stddev) {
    if (stddev > 0) w.sink = random_floats(w.sink.size(), 5, stddev);
    return w;
  }

  // Reuse: the source layer's compressed rows up to `end` tokens, random latents.
  void give_source_rows(Track& t, int64_t end) {
    const int64_t src = c_.kv_source[layer_];
    const model::KvRowLayout& layout = t.st.layout;
    std::vector<uint8_t> ckv(layout.ckv.bytes()), ikey(layout.ikey.bytes(), 0);
    std::vector<float> decoded(layout.ckv.dim);
    while (t.st.compressed_rows(src) < end / c_.ratio(src)) {
      layout.ckv.encode(random_floats(layout.ckv.dim, rng_()).data(), ckv.data());
      layout.ckv.decode(ckv.data(), decoded.data());
      t.st.append_row(src, ckv.data(), ikey.data());
      t.source_rows.push_back(to_double(decoded.data(), layout.ckv.dim));
    }
  }

  // Reuse: each query gets a random set (random order, up to K) of its visible rows
  // as the selection of the top-k source layer.
  void pick_for_reuse(const model::Batch& b, model::Selections& sel) {
    const int64_t src = c_.topk_source[layer_];
    sel.sel[src].resize(b.rows);
    for (int64_t r = 0; r < b.rows; ++r) {
      std::vector<int32_t> rows((b.pos[r] + 1) / c_.ratio(layer_));
      std::iota(rows.begin(), rows.end(), 0);
      std::shuffle(rows.begin(), rows.end(), rng_);
      rows.resize(std::min<size_t>(rows.size(), rng_() % (c_.index_topk + 1)));
      sel.sel[src][r].assign(rows.begin(), rows.end());
    }
  }

  // Window rows of every position and (Full) compressed rows of every complete group.
  void extend_reference(Track& t) {
    const int64_t H = c_.hidden_size, n = static_cast<int64_t>(t.x.size()) / H;
    for (int64_t p = static_cast<int64_t>(t.window.size()); p < n; ++p)
      t.window.push_back(want_.window_row(&t.x[p * H], p));
    if (mode_ != model::LayerMode::Full) return;
    for (int64_t g = static_cast<int64_t>(t.groups.size()); g < n / c_.ratio(layer_); ++g)
      t.groups.push_back(want_.compress(t.x.data(), g));
  }

  // The engine's ring after a step starting at P must hold exactly the last W positions,
  // and (Full) its new compressed rows; each equals the reference up to ambiguous
  // elements, whose stored values the reference then adopts.
  void check_stored_rows(Track& t, int64_t P, int64_t groups_before) {
    const int64_t W = c_.sliding_window, n = static_cast<int64_t>(t.window.size());
    const model::KvRowLayout& layout = t.st.layout;
    std::vector<float> row(c_.head_dim), ikey(layout.ikey.dim);
    for (int64_t q = std::max<int64_t>(0, n - W); q < n; ++q) {
      ASSERT_EQ(t.st.window_pos(layer_, q % W), q) << "ring slot " << q % W;
      layout.window.decode(t.st.window_row(layer_, q % W), row.data());
      if (q < P) continue;
      EXPECT_EQ(real_mismatches(row.data(), t.window[q]), 0) << "window row " << q;
      t.window[q].v = to_double(row.data(), c_.head_dim);
    }
    for (int64_t g = groups_before; g < static_cast<int64_t>(t.groups.size()); ++g) {
      ASSERT_EQ(t.st.compressed_rows(layer_), static_cast<int64_t>(t.groups.size()));
      layout.ckv.decode(t.st.ckv_row(layer_, g), row.data());
      layout.ikey.decode(t.st.ikey_row(layer_, g), ikey.data());
      EXPECT_EQ(real_mismatches(row.data(), t.groups[g].ckv), 0) << "KV row " << g;
      EXPECT_EQ(real_mismatches(ikey.data(), t.groups[g].ikey), 0) << "index key " << g;
      t.groups[g].ckv.v = to_double(row.data(), c_.head_dim);
      t.groups[g].ikey.v = to_double(ikey.data(), layout.ikey.dim);
    }
  }

  // The reference output of the query at position p (batch row r).
  DVec reference_row(const Track& t, int64_t p, const model::Selections& sel, int64_t r) {
    const float* xp = &t.x[p * c_.hidden_size];
    const DVec ql = want_.query_latent(xp);
    std::vector<const DVec*> keys;
    for (int64_t q = std::max<int64_t>(0, p - c_.sliding_window + 1); q <= p; ++q)
      keys.push_back(&t.window[q].v);
    if (mode_ == model::LayerMode::Full) {
      std::vector<DVec> ikeys;
      for (const auto& g : t.groups) ikeys.push_back(g.ikey.v);
      const std::vector<int64_t> chosen =
          ref_top_k(want_.index_scores(xp, ql, p, ikeys), c_.index_topk);
      std::vector<int64_t> got(sel.sel[layer_][r].begin(), sel.sel[layer_][r].end());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, chosen) << "selection";
      for (int64_t j : chosen) keys.push_back(&t.groups[j].ckv.v);
    } else if (mode_ == model::LayerMode::Reuse) {
      for (int32_t j : sel.sel[c_.topk_source[layer_]][r]) keys.push_back(&t.source_rows[j]);
    }
    return want_.attend(want_.queries(ql, p), keys, p);
  }

  const model::ModelConfig& c_;
  int64_t layer_;
  model::LayerMode mode_;
  const model::AttentionWeights w_;
  CsaLayerRef want_;
  std::vector<double> freqs_;
  std::mt19937 rng_;
};

// Sequence 0 steps 16, 16, 8, 1, 6 tokens (past the window and past K·r = 32 compressed
// positions, a decode step, a chunk); sequence 1 steps 3, 16, 1, 2, 5.
void run_steps(int64_t layer, float sink_stddev = 0) {
  const auto& c = golden_model().config;
  AttentionCase t(layer, sink_stddev);
  std::vector<Track> seqs(2, Track{model::SequenceState::empty(c), {}, {}, {}, {}});
  t.step(seqs, {16, 3});
  t.step(seqs, {16, 16});
  t.step(seqs, {8, 1});
  t.step(seqs, {1, 2});
  t.step(seqs, {6, 5});
}

TEST(BlocksAttention, SwaLayer) {
  ASSERT_EQ(golden_model().config.layer_mode[0], model::LayerMode::Swa);
  run_steps(0);
  SCOPED_TRACE("random attn_sink");
  run_steps(0, 2.0f);
}

TEST(BlocksAttention, FullLayerRatioTwo) {
  ASSERT_EQ(golden_model().config.layer_mode[1], model::LayerMode::Full);
  run_steps(1);
}

TEST(BlocksAttention, FullLayerRatioOne) {
  ASSERT_EQ(golden_model().config.layer_mode[6], model::LayerMode::Full);
  run_steps(6);
  SCOPED_TRACE("random attn_sink");
  run_steps(6, 2.0f);
}

TEST(BlocksAttention, ReuseLayer) {
  const auto& c = golden_model().config;
  ASSERT_EQ(c.layer_mode[2], model::LayerMode::Reuse);
  ASSERT_EQ(c.topk_source[2], 1);
  ASSERT_EQ(c.kv_source[2], 1);
  run_steps(2);
}

TEST(BlocksAttention, ScalarKernelBackend) {
  // The same layers through the kernels' scalar Ref backend instead of the Cpu one.
  kernels::ScopedBackend scalar(kernels::Backend::Ref);
  run_steps(1);
  run_steps(2);
}

TEST(BlocksAttention, RopeFrequenciesFollowTheSpec) {
  // Tiny YaRN (Dr 32, θ 160000, factor 4, orig 256): low 0, high 5 (MODEL.md §5), so
  // f_0 is unscaled, f_i for i ≥ 5 are divided by 4, and f_1..f_4 blend linearly.
  const auto& c = golden_model().config;
  const DVec f = layer_freqs(c, 1);
  const int64_t Dr = c.qk_rope_head_dim;
  for (int64_t i = 0; i < Dr / 2; ++i) {
    const double base = std::pow(160000.0, -2.0 * i / Dr), ramp = std::min(i / 5.0, 1.0);
    EXPECT_NEAR(f[i], base * (1 - ramp) + base / 4 * ramp, 1e-15) << i;
  }
  for (int64_t layer : {0, 1, 6, 12}) {
    const DVec want = layer_freqs(c, layer);
    const std::vector<double> got = engine_freqs(c, layer);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * want[i]) << i;
  }
}

}  // namespace
}  // namespace troupe::testing
