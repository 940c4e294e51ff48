// Engram_l (MODEL.md §7) of layers 1 and 4 checked in isolation against a plain
// reference written from the spec: primes by the 'seen' rule, n-gram hashing with the
// stored multipliers (lookback into the state, pad before position 0), ROWFP8 table rows,
// wkv, and the per-stream gate. Two sequences share one batch.
// Tolerance: the stream update X' − X per stream, relative L2 1e-5 (the streams are
// drawn small so the f32 subtraction does not hide the update).
#include <gtest/gtest.h>

#include <set>

#include "model/engram_hash.h"
#include "model/ffn_layers.h"
#include "support/block_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// primes[i][(n−1)·eH + h] of §7, in engram_layer_ids order.
std::vector<std::vector<int64_t>> ref_primes(const model::ModelConfig& c) {
  std::set<int64_t> seen;
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < c.engram_layer_ids.size(); ++i) {
    out.emplace_back();
    for (int64_t n = 1; n < c.engram_max_ngram_size; ++n) {
      int64_t cur = c.engram_vocab_size - 1;
      for (int64_t h = 0; h < c.engram_n_heads; ++h) {
        do ++cur;
        while (!is_prime(cur) || seen.count(cur));
        seen.insert(cur);
        out.back().push_back(cur);
      }
    }
  }
  return out;
}

// The table row ids of one token at position p of a token history (§7).
std::vector<int64_t> ref_ids(const model::ModelConfig& c, const model::ModelWeights& w, int64_t i,
                             const std::vector<int32_t>& history, int64_t p) {
  const int64_t N = c.engram_max_ngram_size, eH = c.engram_n_heads;
  const auto primes = ref_primes(c)[i];
  const std::vector<int64_t>& mult = w.layers[c.engram_layer_ids[i]].engram.multipliers;
  std::vector<int64_t> ids;
  int64_t roll = 0, offset = 0;
  for (int64_t k = 0; k < N; ++k) {
    const int64_t ck =
        p - k < 0 ? w.engram_token_map[c.engram_pad_token_id] : w.engram_token_map[history[p - k]];
    roll = k == 0 ? ck * mult[0] : roll ^ (ck * mult[k]);
    if (k == 0) continue;
    for (int64_t h = 0; h < eH; ++h) {
      const int64_t prime = primes[(k - 1) * eH + h];
      ids.push_back(roll % prime + offset);
      offset += prime;
    }
  }
  return ids;
}

// gate_s · value for every stream of one token: [hc, H].
DVec ref_update(const model::ModelConfig& c, const model::EngramWeights& w, const Dense& wkv,
                const std::vector<int64_t>& ids, const float* X) {
  const int64_t H = c.hidden_size, hc = c.hc_mult, eD = c.engram_head_dim;
  std::vector<float> e(ids.size() * eD);
  for (size_t j = 0; j < ids.size(); ++j) kernels::dequantize_rows(w.embed, ids[j], 1, &e[j * eD]);
  const DVec kv = matvec(wkv, e.data());
  const DVec value(kv.begin() + hc * H, kv.end());
  DVec out(hc * H);
  for (int64_t s = 0; s < hc; ++s) {
    const DVec xs = to_double(X + s * H, H), key(kv.begin() + s * H, kv.begin() + (s + 1) * H);
    double dot = 0;
    for (int64_t k = 0; k < H; ++k)
      dot += xs[k] * w.q_weight[s * H + k] * w.k_weight[s * H + k] * key[k];
    const double g = dot / std::sqrt(mean_square(xs) + c.rms_norm_eps) /
                     std::sqrt(mean_square(key) + c.rms_norm_eps) / std::sqrt(double(H));
    const double sgn = g > 0 ? 1.0 : g < 0 ? -1.0 : 0.0;
    const double gate = sigmoid(sgn * std::sqrt(std::max(std::fabs(g), 1e-6)));
    for (int64_t k = 0; k < H; ++k) out[s * H + k] = gate * value[k];
  }
  return out;
}

TEST(BlocksEngram, PrimesAndOffsetsFollowTheSeenRule) {
  const auto& c = golden_model().config;
  const auto primes = ref_primes(c);
  // Hand values of MODEL.md §7 for the tiny config.
  EXPECT_EQ(primes[0], (std::vector<int64_t>{4999, 5003, 5009, 5011}));
  EXPECT_EQ(primes[1], (std::vector<int64_t>{5021, 5023, 5039, 5051}));
  const model::EngramHashTables t = model::engram_hash_tables(c);
  EXPECT_EQ(t.primes, primes);
  for (size_t i = 0; i < primes.size(); ++i) {
    int64_t sum = 0;
    for (size_t j = 0; j < primes[i].size(); ++j) {
      EXPECT_EQ(t.offsets[i][j], sum) << "layer index " << i << " column " << j;
      sum += primes[i][j];
    }
    EXPECT_EQ(sum, c.engram_num_embeddings[i]);
    EXPECT_EQ(golden_model().weights.layers[c.engram_layer_ids[i]].engram.embed.rows, sum);
  }
}

// Sequence A continues a 6-token history with 4 new tokens (lookback into the state);
// sequence B starts at position 0 (lookback before 0 reads the pad id).
TEST(BlocksEngram, LayersMatchReferenceAcrossStateAndChunk) {
  const auto& g = golden_model();
  const auto& c = g.config;
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  const model::EngramHashTables tables = model::engram_hash_tables(c);
  for (int64_t layer : c.engram_layer_ids) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const model::EngramWeights& w = g.weights.layers[layer].engram;
    const Dense wkv = dense(w.wkv);
    std::vector<int32_t> hist_a = {0, 17, 2, 4095, 17, 33};  // BOS, pad and repeats are ordinary
    model::SequenceState a = model::SequenceState::empty(c), b = model::SequenceState::empty(c);
    a.advance(hist_a);
    const std::vector<int32_t> new_a = {17, 33, 901, 5}, new_b = {0, 1234, 1234};
    model::Batch batch = make_batch({{&a, new_a}, {&b, new_b}});
    std::vector<float> X = random_floats(batch.rows * hc * H, 40 + layer, 0.01f);
    const std::vector<float> X0 = X;
    model::engram_layer(c, g.weights, w, tables, layer, batch, X.data());

    hist_a.insert(hist_a.end(), new_a.begin(), new_a.end());
    for (int64_t r = 0; r < batch.rows; ++r) {
      const std::vector<int32_t>& hist = batch.seq[r] == 0 ? hist_a : new_b;
      const auto ids = ref_ids(c, g.weights, c.engram_index(layer), hist, batch.pos[r]);
      const DVec want = ref_update(c, w, wkv, ids, &X0[r * hc * H]);
      DVec got(hc * H);
      for (int64_t k = 0; k < hc * H; ++k) got[k] = double(X[r * hc * H + k]) - X0[r * hc * H + k];
      EXPECT_LT(rel_l2(got, want), 1e-5) << "row " << r << " (pos " << batch.pos[r] << ")";
    }
  }
}

}  // namespace
}  // namespace troupe::testing
