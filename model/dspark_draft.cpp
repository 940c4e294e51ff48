// DSpark draft forward (MODEL.md §8), top to bottom: embed the slots, S stages of
//   HCMix(attn) -> DraftAttn(RMSNorm(Σ pre X)) -> HCExpand -> HCMix(ffn)
//   -> MoE_d(RMSNorm(Σ a_pre X)) -> HCExpand;  pre = f_pre
// then h = Σ pre X, base = head · RMSNorm(h, norm) and the greedy Markov loop.
#include "model/dspark_draft.h"

#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/sampling.h"
#include "model/batch.h"
#include "model/csa.h"
#include "model/ffn_layers.h"
#include "model/hc.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

// rows[n, D] = rope(RMSNorm(wkv · x), pos): unquantized draft KV rows (§8).
std::vector<float> draft_rows(const ModelConfig& c, const AttentionWeights& w,
                              const std::vector<double>& freqs, const float* x, int64_t n,
                              const int64_t* pos) {
  std::vector<float> kv = linear(x, n, w.wkv);
  rms_norm_rows(kv.data(), n, c.head_dim, w.kv_norm, c.rms_norm_eps);
  rope_rows(kv.data(), n, c.head_dim, c.qk_rope_head_dim, pos, 1, freqs);
  return kv;
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void draft_attention(const ModelConfig& c, const AttentionWeights& w,
                     const std::vector<double>& freqs, const FeatureRing& F, int64_t anchor,
                     const float* x, float* out) {
  const int64_t Bs = c.dspark_block_size, D = c.head_dim, nh = c.num_attention_heads;
  const int64_t Dr = c.qk_rope_head_dim, H = c.hidden_size;
  std::vector<int64_t> pos(Bs);
  for (int64_t i = 0; i < Bs; ++i) pos[i] = anchor + 1 + i;

  std::vector<float> ql = linear(x, Bs, w.wq_a);
  rms_norm_rows(ql.data(), Bs, c.q_lora_rank, w.q_norm, c.rms_norm_eps);
  std::vector<float> q = linear(ql.data(), Bs, w.wq_b);
  rope_rows(q.data(), Bs * nh, D, Dr, pos.data(), nh, freqs);

  // Context rows: F[p] enters wkv directly (no attn_norm), at its own position.
  std::vector<int64_t> ctx_pos;
  std::vector<float> ctx_in;
  for (int64_t p = std::max<int64_t>(0, anchor - c.sliding_window + 1); p <= anchor; ++p)
    if (const float* f = F.row(p)) {
      ctx_pos.push_back(p);
      ctx_in.insert(ctx_in.end(), f, f + H);
    }
  const int64_t n_ctx = static_cast<int64_t>(ctx_pos.size());
  const std::vector<float> ctx =
      n_ctx ? draft_rows(c, w, freqs, ctx_in.data(), n_ctx, ctx_pos.data()) : std::vector<float>{};
  const std::vector<float> block = draft_rows(c, w, freqs, x, Bs, pos.data());

  // Every slot sees the same keys: the context rows, then all Bs block rows.
  const int64_t max_keys = n_ctx + Bs;
  std::vector<const float*> keys(Bs * max_keys);
  for (int64_t i = 0; i < Bs; ++i) {
    for (int64_t j = 0; j < n_ctx; ++j) keys[i * max_keys + j] = &ctx[j * D];
    for (int64_t j = 0; j < Bs; ++j) keys[i * max_keys + n_ctx + j] = &block[j * D];
  }
  std::vector<float> o(Bs * nh * D);
  kernels::AttentionParams ap;
  ap.q = q.data();
  ap.keys = keys.data();
  ap.sink = w.sink.data();
  ap.out = o.data();
  ap.m = Bs;
  ap.heads = nh;
  ap.dim = D;
  ap.max_keys = max_keys;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  kernels::attention(ap);
  rope_rows(o.data(), Bs * nh, D, Dr, pos.data(), nh, freqs, /*inverse=*/true);
  attention_output(c, w, Bs, o.data(), out);
}

DsparkDraft::DsparkDraft(const ModelConfig& c, const ModelWeights& target,
                         const DsparkWeights& draft)
    : c_(c),
      target_(target),
      w_(draft),
      freqs_(kernels::rope_frequencies(c.rope_theta, c.qk_rope_head_dim, {})) {
  TROUPE_CHECK(static_cast<int64_t>(draft.stages.size()) == c.num_nextn_predict_layers,
               "DsparkDraft: ", draft.stages.size(), " stages bound, config has ",
               c.num_nextn_predict_layers);
}

// One Block_{mtp.s} (§5.2 with the draft attention and MoE) on all slots jointly.
void DsparkDraft::stage(int64_t s, const FeatureRing& F, int64_t anchor, std::vector<float>& X,
                        std::vector<float>& pre) const {
  const DsparkStageWeights& st = w_.stages[s];
  const int64_t Bs = c_.dspark_block_size, H = c_.hidden_size;
  std::vector<float> x(Bs * H), y(Bs * H);
  hc_premix(c_, X.data(), pre.data(), Bs, x.data());
  rms_norm_rows(x.data(), Bs, H, st.attn_norm, c_.rms_norm_eps);
  draft_attention(c_, st.attn, freqs_, F, anchor, x.data(), y.data());
  const HcMix a = hc_mix(c_, st.hc_attn, X.data(), Bs);
  hc_expand(c_, y.data(), a, Bs, X.data());

  const HcMix f = hc_mix(c_, st.hc_ffn, X.data(), Bs);
  hc_premix(c_, X.data(), a.pre.data(), Bs, x.data());
  rms_norm_rows(x.data(), Bs, H, st.ffn_norm, c_.rms_norm_eps);
  Batch slots;  // the MoE only needs the row count (no trace)
  slots.rows = Bs;
  moe_layer(c_, st.ffn, c_.num_hidden_layers + s, slots, x.data(), y.data(), c_.dspark_top_k);
  hc_expand(c_, y.data(), f, Bs, X.data());
  pre = f.pre;
}

std::vector<float> DsparkDraft::hidden(const FeatureRing& F, int64_t anchor,
                                       int32_t anchor_token) const {
  const int64_t Bs = c_.dspark_block_size, H = c_.hidden_size, hc = c_.hc_mult;
  TROUPE_CHECK(anchor >= 0 && F.row(anchor) != nullptr, "draft: no target features F[", anchor,
               "] at the anchor");
  TROUPE_CHECK(anchor_token >= 0 && anchor_token < c_.vocab_size, "draft: anchor token ",
               anchor_token, " out of range");
  std::vector<float> X(Bs * hc * H), pre(Bs * hc, 0.0f);
  for (int64_t i = 0; i < Bs; ++i) {
    float* xi = &X[i * hc * H];
    const int32_t tok = i == 0 ? anchor_token : static_cast<int32_t>(c_.dspark_noise_token_id);
    kernels::dequantize_rows(target_.embed, tok, 1, xi);
    for (int64_t s = 1; s < hc; ++s) std::memcpy(xi + s * H, xi, H * sizeof(float));
    pre[i * hc] = 1.0f;
  }
  for (int64_t s = 0; s < c_.num_nextn_predict_layers; ++s) stage(s, F, anchor, X, pre);
  std::vector<float> h(Bs * H);
  hc_premix(c_, X.data(), pre.data(), Bs, h.data());
  return h;
}

DraftProposal DsparkDraft::propose(const FeatureRing& F, int64_t anchor, int32_t anchor_token,
                                   int32_t bonus, int64_t k, float conf_min,
                                   const TraceFn& trace) const {
  const int64_t H = c_.hidden_size, Mr = c_.dspark_markov_rank, V = c_.vocab_size;
  TROUPE_CHECK(bonus >= 0 && bonus < V, "draft: bonus token ", bonus, " out of range");
  k = std::clamp<int64_t>(std::min(k, c_.dspark_block_size - 1), 0,
                          c_.max_position_embeddings - 2 - anchor);
  const std::vector<float> h = hidden(F, anchor, anchor_token);
  std::vector<float> hn(h.begin(), h.begin() + (k + 1) * H);
  rms_norm_rows(hn.data(), k + 1, H, w_.norm, c_.rms_norm_eps);
  std::vector<float> base;  // [k, V] head · hn of slots 1..k
  if (k > 0) base = linear(hn.data() + H, k, target_.head);

  DraftProposal out;
  std::vector<float> e(Mr), logit(V);
  int32_t prev = anchor_token;
  float joint = 1.0f;
  bool cut = false;
  for (int64_t i = 0; i <= k; ++i) {
    kernels::dequantize_rows(w_.markov_embed, prev, 1, e.data());
    const float z = dot(w_.confidence.data(), &h[i * H], H) + dot(&w_.confidence[H], e.data(), Mr);
    out.confidence.push_back(1.0f / (1.0f + std::exp(-z)));
    if (i == 0) {
      prev = bonus;  // slot 0 predicts tok[a+1], which the target already chose
      continue;
    }
    linear(e.data(), 1, w_.markov_head, logit.data());
    for (int64_t v = 0; v < V; ++v) logit[v] += base[(i - 1) * V + v];
    if (trace) {
      trace("dspark.base", -1, i, {&base[(i - 1) * V], static_cast<size_t>(V)});
      trace("dspark.logits", -1, i, logit);
    }
    const int32_t d = kernels::argmax(logit.data(), V);
    joint *= out.confidence.back();
    cut = cut || joint <= conf_min;
    if (!cut) out.tokens.push_back(d);
    prev = d;
  }
  return out;
}

}  // namespace troupe::model
