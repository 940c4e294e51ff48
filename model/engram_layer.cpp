// Engram conditional memory (MODEL.md §7), applied to the streams at block start:
//   ids  = hashed 2..N-grams of compressed token ids (one per head and order)
//   e    = concat(ROWFP8 table rows[ids]);  kv = wkv · e = [key_0 .. key_{hc-1}, value]
//   g_s  = <X_s ⊙ q_s ⊙ k_s, key_s> / (rms(X_s) · rms(key_s) · sqrt(H))
//   X_s += sigmoid(sign(g_s)·sqrt(max(|g_s|, 1e-6))) · value
#include <cmath>

#include "kernels/weights.h"
#include "model/ffn_layers.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

// e[row] = concat of the nG table rows the row's n-grams hash to.
scratch_vector<float> lookup_rows(const ModelConfig& c, const ModelWeights& mw,
                               const EngramWeights& w, const EngramHashTables& t,
                               int64_t index, const Batch& b) {
  const int64_t N = c.engram_max_ngram_size, eD = c.engram_head_dim;
  const int64_t nG = c.engram_n_heads * (N - 1);
  const int64_t pad = mw.engram_token_map[c.engram_pad_token_id];
  scratch_vector<float> e(b.rows * nG * eD);
  scratch_vector<int64_t> ctok(N), ids(nG);
  for (int64_t row = 0; row < b.rows; ++row) {
    const int64_t s = b.seq[row], P = b.chunk_start(s);
    for (int64_t k = 0; k < N; ++k) {
      const int64_t q = b.pos[row] - k;
      const int32_t tok = q < 0 ? -1 : q >= P ? b.token[b.begin[s] + q - P] : b.states[s]->token(q);
      ctok[k] = q >= 0 ? mw.engram_token_map[tok] : pad;
    }
    engram_hash_ids(t, index, ctok.data(), w.multipliers.data(), ids.data());
    for (int64_t i = 0; i < nG; ++i)
      kernels::dequantize_rows(w.embed, ids[i], 1, &e[(row * nG + i) * eD]);
  }
  return e;
}

double mean_square(const float* x, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return ss / n;
}

}  // namespace

void engram_layer(const ModelConfig& c, const ModelWeights& mw, const EngramWeights& w,
                  const EngramHashTables& tables, int64_t layer, const Batch& b, float* X) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  const int64_t index = c.engram_index(layer);
  ScopedOp op(Op::Engram);
  const scratch_vector<float> e = lookup_rows(c, mw, w, tables, index, b);
  const scratch_vector<float> kv = linear(e.data(), b.rows, w.wkv);
  const double eps = c.rms_norm_eps;
  for (int64_t row = 0; row < b.rows; ++row) {
    const float* kvr = &kv[row * (hc + 1) * H];
    const float* value = kvr + hc * H;
    for (int64_t s = 0; s < hc; ++s) {
      float* xs = X + (row * hc + s) * H;
      const float* key = kvr + s * H;
      double dot = 0;
      for (int64_t i = 0; i < H; ++i)
        dot += static_cast<double>(xs[i]) * w.q_weight[s * H + i] * w.k_weight[s * H + i] * key[i];
      const double g = dot / std::sqrt(mean_square(xs, H) + eps) /
                       std::sqrt(mean_square(key, H) + eps) / std::sqrt(static_cast<double>(H));
      const float gf = static_cast<float>(g);
      const float sgn = gf > 0 ? 1.0f : gf < 0 ? -1.0f : 0.0f;
      const float gate = 1.0f / (1.0f + std::exp(-sgn * std::sqrt(std::max(std::fabs(gf), 1e-6f))));
      for (int64_t i = 0; i < H; ++i) xs[i] += gate * value[i];
    }
  }
}

}  // namespace troupe::model
