// Plain reference of one CSA2 attention layer (MODEL.md §5.3-5.4) for the block tests:
// queries, window rows, the compressor's group rows, indexer scores and selections
// (with §5.4's rank ties), and sink attention with inverse rope and grouped wo_a / wo_b.
// Written from the spec in double over exactly dequantized weights; the §3 quantizers
// come from block_ref.h. Slow on purpose: every call recomputes from its inputs.
#pragma once

#include <limits>

#include "model/weights.h"
#include "support/block_ref.h"

namespace troupe::testing::ref {

constexpr double kInfD = std::numeric_limits<double>::infinity();

class CsaLayerRef {
 public:
  CsaLayerRef(const model::ModelConfig& c, const model::AttentionWeights& w, int64_t layer)
      : c_(c),
        w_(w),
        layer_(layer),
        freqs_(layer_freqs(c, layer)),
        wq_a_(dense(w.wq_a)),
        wq_b_(dense(w.wq_b)),
        wkv_(dense(w.wkv)),
        wo_a_(dense(w.wo_a)),
        wo_b_(dense(w.wo_b)) {
    if (w.has_compressor) {
      cwkv_ = dense(w.compressor.wkv);
      if (c.ratio(layer) > 1) cwgate_ = dense(w.compressor.wgate);
      iwk_ = dense(w.indexer.wk);
    }
    if (w.has_indexer) {
      iwq_b_ = dense(w.indexer.wq_b);
      iwproj_ = dense(w.indexer.weights_proj);
    }
  }

  // ql = RMSNorm(wq_a·x, q_norm)   [Q]
  DVec query_latent(const float* x) const { return rms_norm(matvec(wq_a_, x), w_.q_norm, eps()); }

  // q_h = rope(wq_b·ql)_h at p   [nh][D]
  std::vector<DVec> queries(const DVec& ql, int64_t p) const {
    const DVec q = matvec(wq_b_, ql.data());
    const int64_t D = c_.head_dim;
    std::vector<DVec> heads;
    for (int64_t h = 0; h < c_.num_attention_heads; ++h) {
      heads.emplace_back(q.begin() + h * D, q.begin() + (h + 1) * D);
      rope(heads.back(), c_.qk_rope_head_dim, p, freqs_);
    }
    return heads;
  }

  // kvw = fp8_ue8m0(rope(RMSNorm(wkv·x, kv_norm), p)), dequantized   [D]
  QuantRow window_row(const float* x, int64_t p) const {
    DVec kv = rms_norm(matvec(wkv_, x), w_.kv_norm, eps());
    rope(kv, c_.qk_rope_head_dim, p, freqs_);
    return quantize_row(kv, Quant::Fp8Ue8m0);
  }

  // v_k = compressor.wkv·x_k and s_k = compressor.wgate·x_k of one token (the carry).
  DVec carry_v(const float* x) const { return matvec(cwkv_, x); }
  DVec carry_s(const float* x) const { return matvec(cwgate_, x); }

  struct GroupRows {
    QuantRow ckv;   // nvfp4(rope(lat, g·r))  [D]
    QuantRow ikey;  // mxfp4(rope(RMSNorm(wk·lat, k_norm), g·r))  [dI]
  };

  // Compressor rows of group g; x: attention inputs of positions 0.. [.., H].
  GroupRows compress(const float* x, int64_t g) const {
    const int64_t r = c_.ratio(layer_), D = c_.head_dim, H = c_.hidden_size;
    DVec lat(D, 0.0);
    if (r == 1) {
      lat = carry_v(x + g * H);
    } else {
      std::vector<DVec> v, s;
      for (int64_t k = 0; k < r; ++k) {
        v.push_back(carry_v(x + (g * r + k) * H));
        s.push_back(carry_s(x + (g * r + k) * H));
      }
      for (int64_t ch = 0; ch < D; ++ch) {
        double mx = -kInfD, den = 0;
        for (int64_t k = 0; k < r; ++k) mx = std::max(mx, s[k][ch]);
        for (int64_t k = 0; k < r; ++k) den += std::exp(s[k][ch] - mx);
        for (int64_t k = 0; k < r; ++k) lat[ch] += v[k][ch] * std::exp(s[k][ch] - mx) / den;
      }
    }
    lat = rms_norm(lat, w_.compressor.norm, eps());
    DVec ik = rms_norm(matvec(iwk_, lat.data()), w_.indexer.k_norm, eps());  // unrotated lat
    rope(ik, c_.qk_rope_head_dim, g * r, freqs_);
    rope(lat, c_.qk_rope_head_dim, g * r, freqs_);
    return {quantize_row(lat, Quant::Nvfp4), quantize_row(ik, Quant::Mxfp4)};
  }

  // score[j] of §5.4 over the KV source's index keys; −inf where j is not visible from p,
  // or not in `cand` when given (level 2). *qi_ambiguous (if given) tells whether the
  // mxfp4 query may round differently in f32 (block_ref.h QuantRow).
  DVec index_scores(const float* x, const DVec& ql, int64_t p, const std::vector<DVec>& keys,
                    const std::vector<int64_t>* cand = nullptr,
                    bool* qi_ambiguous = nullptr) const {
    const int64_t nI = c_.index_n_heads, dI = c_.index_head_dim;
    const DVec qall = matvec(iwq_b_, ql.data());
    const DVec wts = matvec(iwproj_, x);
    std::vector<DVec> qi;
    for (int64_t h = 0; h < nI; ++h) {
      qi.emplace_back(qall.begin() + h * dI, qall.begin() + (h + 1) * dI);
      rope(qi.back(), c_.qk_rope_head_dim, p, freqs_);
      const QuantRow qq = quantize_row(qi.back(), Quant::Mxfp4);
      qi.back() = qq.v;
      if (qi_ambiguous) *qi_ambiguous = *qi_ambiguous || qq.any_ambiguous();
    }
    const int64_t visible = (p + 1) / c_.ratio(layer_);
    DVec score(keys.size(), -kInfD);
    for (int64_t j = 0; j < std::min<int64_t>(visible, keys.size()); ++j) {
      if (cand && !std::count(cand->begin(), cand->end(), j)) continue;
      double s = 0;
      for (int64_t h = 0; h < nI; ++h) {
        double dot = 0;
        for (int64_t k = 0; k < dI; ++k) dot += qi[h][k] * keys[j][k];
        s += std::max(dot, 0.0) * wts[h] / std::sqrt(double(dI)) / std::sqrt(double(nI));
      }
      score[j] = s;
    }
    return score;
  }

  // out = wo_b · concat_g(wo_a[g] · concat(o_h of group g)), o_h = inverse_rope(sink
  // attention of q_h over keys, p)   [H]
  DVec attend(const std::vector<DVec>& q, const std::vector<const DVec*>& keys, int64_t p) const {
    const int64_t D = c_.head_dim, nh = c_.num_attention_heads, G = c_.o_groups, O = c_.o_lora_rank;
    DVec o_all;
    for (int64_t h = 0; h < nh; ++h) {
      DVec logit;
      double m = w_.sink[h];
      for (const DVec* k : keys) {
        double dot = 0;
        for (int64_t i = 0; i < D; ++i) dot += q[h][i] * (*k)[i];
        logit.push_back(dot / std::sqrt(double(D)));
        m = std::max(m, logit.back());
      }
      DVec o(D, 0.0);
      double den = std::exp(w_.sink[h] - m);
      for (size_t j = 0; j < keys.size(); ++j) {
        const double e = std::exp(logit[j] - m);
        den += e;
        for (int64_t i = 0; i < D; ++i) o[i] += e * (*keys[j])[i];
      }
      for (double& v : o) v /= den;
      rope(o, c_.qk_rope_head_dim, p, freqs_, /*inverse=*/true);
      o_all.insert(o_all.end(), o.begin(), o.end());
    }
    const int64_t group_width = nh * D / G;
    DVec u;
    for (int64_t g = 0; g < G; ++g) {
      const DVec ug = matvec(wo_a_, &o_all[g * group_width], g * O, O);
      u.insert(u.end(), ug.begin(), ug.end());
    }
    return matvec(wo_b_, u.data());
  }

 private:
  double eps() const { return c_.rms_norm_eps; }

  const model::ModelConfig& c_;
  const model::AttentionWeights& w_;
  int64_t layer_;
  DVec freqs_;
  Dense wq_a_, wq_b_, wkv_, wo_a_, wo_b_;
  Dense cwkv_, cwgate_, iwk_, iwq_b_, iwproj_;
};

// The engine's rope frequencies of a layer, built the way model::Forward builds them.
inline std::vector<double> engine_freqs(const model::ModelConfig& c, int64_t layer) {
  if (c.ratio(layer) == 0)
    return kernels::rope_frequencies(c.rope_theta, c.qk_rope_head_dim, kernels::YarnScaling{});
  return kernels::rope_frequencies(c.compress_rope_theta, c.qk_rope_head_dim, c.rope_scaling);
}

// top-K of §5.4: the first min(K, n) rows of rank(score) with score > −inf, as a set
// (ascending).
inline std::vector<int64_t> ref_top_k(const DVec& score, int64_t K) {
  std::vector<int64_t> sel;
  for (int64_t j : rank_desc(score))
    if (static_cast<int64_t>(sel.size()) < K && score[j] > -kInfD) sel.push_back(j);
  std::sort(sel.begin(), sel.end());
  return sel;
}

// Level-1 candidates of §5.4 (layer cs): the visible rows of the first min(Kb, #blocks)
// blocks of rank(block max) with a finite max; the newest visible row's block is +inf.
inline std::vector<int64_t> ref_candidates(const DVec& score, int64_t visible, int64_t Bc,
                                           int64_t Kb) {
  const int64_t blocks = (static_cast<int64_t>(score.size()) + Bc - 1) / Bc;
  DVec bmax(blocks, -kInfD);
  for (int64_t j = 0; j < visible; ++j) bmax[j / Bc] = std::max(bmax[j / Bc], score[j]);
  if (visible > 0) bmax[(visible - 1) / Bc] = kInfD;
  const std::vector<int64_t> order = rank_desc(bmax);
  std::vector<char> keep(blocks, 0);
  for (int64_t i = 0; i < std::min(Kb, blocks); ++i)
    if (bmax[order[i]] > -kInfD) keep[order[i]] = 1;
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < visible; ++j)
    if (keep[j / Bc]) rows.push_back(j);
  return rows;
}

}  // namespace troupe::testing::ref
