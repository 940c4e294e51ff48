// DSpark draft forward (MODEL.md §8), top to bottom: embed the slots, S stages of
//   HCMix(attn) -> DraftAttn(RMSNorm(Σ pre X)) -> HCExpand -> HCMix(ffn)
//   -> MoE_d(RMSNorm(Σ a_pre X)) -> HCExpand;  pre = f_pre
// then h = Σ pre X, base = head · RMSNorm(h, norm) and the greedy Markov loop.
#include "model/dspark_draft.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/parallel.h"
#include "kernels/sampling.h"
#include "model/batch.h"
#include "model/csa.h"
#include "model/ffn_layers.h"
#include "model/hc.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

// rows[n, D] = rope(RMSNorm(wkv · x), pos): unquantized draft KV rows (§8).
scratch_vector<float> draft_rows(const ModelConfig& c, const AttentionWeights& w,
                              const std::vector<double>& freqs, const float* x, int64_t n,
                              const int64_t* pos) {
  scratch_vector<float> kv = linear(x, n, w.wkv);
  rms_norm_rows(kv.data(), n, c.head_dim, w.kv_norm, c.rms_norm_eps);
  rope_rows(kv.data(), n, c.head_dim, c.qk_rope_head_dim, pos, 1, freqs);
  return kv;
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The Markov sampling loop of §8 over draft positions i = 0..k as one pass, no kernel
// call or allocation per vocabulary sweep beyond one parallel_for: for each position a
// sweep over the vocabulary in blocks of kVocabBlock rows computes
// logit_i = base_i + markov_head · e_i block by block (each block the [V, Mr] GEMM's own
// rows, so the values are bit for bit those of one GEMM over V) and that block's argmax
// while the block is in cache; the blocks' winners reduce in id order, ties -> lowest id,
// exactly kernels::argmax. conf_i and the next e_i run on the calling thread. Buffers
// come from the scratch pool.
class MarkovLoop {
 public:
  static constexpr int64_t kVocabBlock = 2048;

  MarkovLoop(const ModelConfig& c, const DsparkWeights& w, const float* h, const float* base,
             const TraceFn& trace)
      : c_(c), w_(w), h_(h), base_(base), trace_(trace) {}

  // h: [k + 1, H] pre-norm hidden states of slots 0..k; base: [k, V] of slots 1..k.
  // Fills out.confidence [k + 1] and appends the drafts to out.tokens.
  void run(int32_t anchor_token, int32_t bonus, int64_t k, float conf_min,
           DraftProposal& out) const {
    const int64_t H = c_.hidden_size, Mr = c_.dspark_markov_rank, V = c_.vocab_size;
    const int64_t blocks = (V + kVocabBlock - 1) / kVocabBlock;
    scratch_vector<float> e(Mr), logit(V);
    scratch_vector<int32_t> winner(blocks);
    int32_t prev = anchor_token;
    float joint = 1.0f;
    bool cut = false;
    for (int64_t i = 0; i <= k; ++i) {
      kernels::dequantize_rows(w_.markov_embed, prev, 1, e.data());
      const float z = dot(w_.confidence.data(), &h_[i * H], H) + dot(&w_.confidence[H], e.data(), Mr);
      out.confidence[i] = 1.0f / (1.0f + std::exp(-z));
      if (i == 0) {
        prev = bonus;  // slot 0 predicts tok[a+1], which the target already chose
        continue;
      }
      const float* base = &base_[(i - 1) * V];
      kernels::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk)
          winner[blk] = sweep_block(e.data(), base, blk * kVocabBlock,
                                    std::min(kVocabBlock, V - blk * kVocabBlock), logit.data());
      });
      if (trace_) {
        trace_("dspark.base", -1, i, {base, static_cast<size_t>(V)});
        trace_("dspark.logits", -1, i, {logit.data(), static_cast<size_t>(V)});
      }
      const int32_t d = reduce(logit.data(), winner);
      joint *= out.confidence[i];
      cut = cut || joint <= conf_min;
      if (!cut) out.tokens.push_back(d);
      prev = d;
    }
  }

 private:
  // logit[v0, v0 + n) = base + markov_head[v0, v0 + n) · e; returns the first index of the
  // block's largest non-NaN logit (v0 if all are NaN).
  int32_t sweep_block(const float* e, const float* base, int64_t v0, int64_t n,
                      float* logit) const {
    float* y = logit + v0;
    linear(e, 1, row_slice(w_.markov_head, v0, n), y);
    int64_t best = -1;
    for (int64_t v = 0; v < n; ++v) {
      y[v] += base[v0 + v];
      if (!std::isnan(y[v]) && (best < 0 || y[v] > y[best])) best = v;
    }
    return static_cast<int32_t>(v0 + std::max<int64_t>(best, 0));
  }

  // kernels::argmax over the blocks' winners: best starts at 0 and moves on a strictly
  // larger value, so a NaN at 0 stays and other NaNs are never picked.
  static int32_t reduce(const float* logit, const scratch_vector<int32_t>& winner) {
    if (std::isnan(logit[0])) return 0;
    int32_t best = 0;
    for (int32_t w : winner)
      if (logit[w] > logit[best]) best = w;
    return best;
  }

  const ModelConfig& c_;
  const DsparkWeights& w_;
  const float* h_;
  const float* base_;
  const TraceFn& trace_;
};

}  // namespace

void draft_attention(const ModelConfig& c, const AttentionWeights& w,
                     const std::vector<double>& freqs, const FeatureRing& F, int64_t anchor,
                     const float* x, float* out) {
  const DraftInput q{&F, anchor, 0, 0, 0};
  draft_attention(c, w, freqs, {&q, 1}, x, out);
}

// Every query's slots at once: the projections (wq_a, wq_b, wkv of the block and of all
// contexts, wo_a / wo_b) as GEMMs over all their rows, the attention itself with each
// slot's own keys. A GEMM row does not depend on the batch around it, so each query's
// rows are those of a call with that query alone, bit for bit.
void draft_attention(const ModelConfig& c, const AttentionWeights& w,
                     const std::vector<double>& freqs, std::span<const DraftInput> queries,
                     const float* x, float* out) {
  const int64_t Bs = c.dspark_block_size, D = c.head_dim, nh = c.num_attention_heads;
  const int64_t Dr = c.qk_rope_head_dim, H = c.hidden_size;
  const auto nq = static_cast<int64_t>(queries.size());
  const int64_t rows = nq * Bs;
  scratch_vector<int64_t> pos(rows);
  for (int64_t n = 0; n < nq; ++n)
    for (int64_t i = 0; i < Bs; ++i) pos[n * Bs + i] = queries[n].anchor + 1 + i;

  std::optional<ScopedOp> op(std::in_place, Op::AttnQuery);
  scratch_vector<float> ql = linear(x, rows, w.wq_a);
  rms_norm_rows(ql.data(), rows, c.q_lora_rank, w.q_norm, c.rms_norm_eps);
  scratch_vector<float> q = linear(ql.data(), rows, w.wq_b);
  rope_rows(q.data(), rows * nh, D, Dr, pos.data(), nh, freqs);
  op.reset();
  op.emplace(Op::AttnWindow);  // the contexts' and the blocks' KV rows

  // Context rows: F[p] enters wkv directly (no attn_norm), at its own position; query n's
  // are ctx rows [ctx_begin[n], ctx_begin[n + 1]).
  scratch_vector<int64_t> ctx_pos, ctx_begin(nq + 1, 0);
  scratch_vector<float> ctx_in;
  for (int64_t n = 0; n < nq; ++n) {
    const int64_t anchor = queries[n].anchor;
    for (int64_t p = std::max<int64_t>(0, anchor - c.sliding_window + 1); p <= anchor; ++p)
      if (const float* f = queries[n].features->row(p)) {
        ctx_pos.push_back(p);
        ctx_in.insert(ctx_in.end(), f, f + H);
      }
    ctx_begin[n + 1] = static_cast<int64_t>(ctx_pos.size());
  }
  const int64_t n_ctx = ctx_begin[nq];
  const scratch_vector<float> ctx =
      n_ctx ? draft_rows(c, w, freqs, ctx_in.data(), n_ctx, ctx_pos.data()) : scratch_vector<float>{};
  const scratch_vector<float> block = draft_rows(c, w, freqs, x, rows, pos.data());

  // Every slot of a query sees the same keys: its context rows, then its Bs block rows;
  // null past them up to the longest list (no key).
  int64_t max_keys = 0;
  for (int64_t n = 0; n < nq; ++n) max_keys = std::max(max_keys, ctx_begin[n + 1] - ctx_begin[n] + Bs);
  scratch_vector<const float*> keys(rows * max_keys, nullptr);
  for (int64_t n = 0; n < nq; ++n)
    for (int64_t i = 0; i < Bs; ++i) {
      const float** k = &keys[(n * Bs + i) * max_keys];
      for (int64_t j = ctx_begin[n]; j < ctx_begin[n + 1]; ++j) *k++ = &ctx[j * D];
      for (int64_t j = 0; j < Bs; ++j) *k++ = &block[(n * Bs + j) * D];
    }
  op.reset();
  op.emplace(Op::AttnCore);
  scratch_vector<float> o(rows * nh * D);
  kernels::AttentionParams ap;
  ap.q = q.data();
  ap.keys = keys.data();
  ap.sink = w.sink.data();
  ap.out = o.data();
  ap.m = rows;
  ap.heads = nh;
  ap.dim = D;
  ap.max_keys = max_keys;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  kernels::attention(ap);
  rope_rows(o.data(), rows * nh, D, Dr, pos.data(), nh, freqs, /*inverse=*/true);
  op.reset();
  op.emplace(Op::AttnOutput);
  attention_output(c, w, rows, o.data(), out);
}

DsparkDraft::DsparkDraft(const ModelConfig& c, const ModelWeights& target,
                         const DsparkWeights& draft, kernels::GemmPrecision expert_precision)
    : c_(c),
      target_(target),
      w_(draft),
      freqs_(kernels::rope_frequencies(c.rope_theta, c.qk_rope_head_dim, {})),
      expert_precision_(expert_precision) {
  TROUPE_CHECK(static_cast<int64_t>(draft.stages.size()) == c.num_nextn_predict_layers,
               "DsparkDraft: ", draft.stages.size(), " stages bound, config has ",
               c.num_nextn_predict_layers);
}

// One Block_{mtp.s} (§5.2 with the draft attention and MoE) on all slots of every query
// jointly (the draft attention keeps each query to its own keys). The MoE's layer
// number is the stage (the draft placement's numbering; nothing traces the draft's MoE).
void DsparkDraft::stage(int64_t s, std::span<const DraftInput> q, scratch_vector<float>& X,
                        scratch_vector<float>& pre, RoutedExperts* routed) const {
  const DsparkStageWeights& st = w_.stages[s];
  const int64_t Bs = c_.dspark_block_size, H = c_.hidden_size;
  const int64_t rows = static_cast<int64_t>(q.size()) * Bs;
  scratch_vector<float> x(rows * H), y(rows * H);
  hc_premix(c_, X.data(), pre.data(), rows, x.data());
  rms_norm_rows(x.data(), rows, H, st.attn_norm, c_.rms_norm_eps);
  draft_attention(c_, st.attn, freqs_, q, x.data(), y.data());
  const HcMix a = hc_mix(c_, st.hc_attn, X.data(), rows);
  hc_expand(c_, y.data(), a, rows, X.data());

  const HcMix f = hc_mix(c_, st.hc_ffn, X.data(), rows);
  hc_premix(c_, X.data(), a.pre.data(), rows, x.data());
  rms_norm_rows(x.data(), rows, H, st.ffn_norm, c_.rms_norm_eps);
  Batch slots;  // the MoE only needs the row count (no trace) and the experts' precision
  slots.rows = rows;
  slots.expert_precision = expert_precision_;
  moe_layer(c_, st.ffn, s, slots, x.data(), y.data(), c_.dspark_top_k, routed);
  hc_expand(c_, y.data(), f, rows, X.data());
  pre = f.pre;
}

void DsparkDraft::join_idle(RoutedExperts& routed) const {
  for (int64_t s = 0; s < c_.num_nextn_predict_layers; ++s)
    routed.run(RoutedBatch::none(c_, w_.stages[s].ffn, s, c_.dspark_top_k, expert_precision_));
}

std::vector<float> DsparkDraft::hidden(const FeatureRing& F, int64_t anchor,
                                       int32_t anchor_token) const {
  const DraftInput q{&F, anchor, anchor_token, 0, 0};
  const scratch_vector<float> h = hidden_rows({&q, 1}, nullptr);
  return {h.begin(), h.end()};
}

scratch_vector<float> DsparkDraft::hidden_rows(std::span<const DraftInput> q,
                                               RoutedExperts* routed) const {
  const int64_t Bs = c_.dspark_block_size, H = c_.hidden_size, hc = c_.hc_mult;
  const int64_t rows = static_cast<int64_t>(q.size()) * Bs;
  scratch_vector<float> X(rows * hc * H), pre(rows * hc, 0.0f);
  for (size_t n = 0; n < q.size(); ++n) {
    TROUPE_CHECK(q[n].anchor >= 0 && q[n].features && q[n].features->row(q[n].anchor) != nullptr,
                 "draft: no target features F[", q[n].anchor, "] at the anchor");
    TROUPE_CHECK(q[n].anchor_token >= 0 && q[n].anchor_token < c_.vocab_size,
                 "draft: anchor token ", q[n].anchor_token, " out of range");
    for (int64_t i = 0; i < Bs; ++i) {
      const int64_t row = static_cast<int64_t>(n) * Bs + i;
      float* xi = &X[row * hc * H];
      const int32_t tok =
          i == 0 ? q[n].anchor_token : static_cast<int32_t>(c_.dspark_noise_token_id);
      kernels::dequantize_rows(target_.embed, tok, 1, xi);
      for (int64_t s = 1; s < hc; ++s) std::memcpy(xi + s * H, xi, H * sizeof(float));
      pre[row * hc] = 1.0f;
    }
  }
  for (int64_t s = 0; s < c_.num_nextn_predict_layers; ++s) stage(s, q, X, pre, routed);
  scratch_vector<float> h(rows * H);
  hc_premix(c_, X.data(), pre.data(), rows, h.data());
  return h;
}

DraftProposal DsparkDraft::propose(const FeatureRing& F, int64_t anchor, int32_t anchor_token,
                                   int32_t bonus, int64_t k, float conf_min,
                                   const TraceFn& trace) const {
  DraftProposal out;
  propose(F, anchor, anchor_token, bonus, k, out, conf_min, trace);
  return out;
}

void DsparkDraft::propose(const FeatureRing& F, int64_t anchor, int32_t anchor_token,
                          int32_t bonus, int64_t k, DraftProposal& out, float conf_min,
                          const TraceFn& trace) const {
  TROUPE_CHECK(bonus >= 0 && bonus < c_.vocab_size, "draft: bonus token ", bonus, " out of range");
  const DraftInput q{&F, anchor, anchor_token, bonus, k};
  const scratch_vector<float> h = hidden_rows({&q, 1}, nullptr);
  finish(q, h.data(), out, conf_min, trace);
}

void DsparkDraft::propose_batch(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                                RoutedExperts& routed, float conf_min) const {
  if (queries.empty()) return join_idle(routed);
  propose_rows(queries, out, &routed, conf_min);
}

void DsparkDraft::propose_batch(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                                float conf_min) const {
  if (!queries.empty()) propose_rows(queries, out, nullptr, conf_min);
}

void DsparkDraft::propose_rows(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                               RoutedExperts* routed, float conf_min) const {
  TROUPE_CHECK(out.size() == queries.size(), "draft: ", out.size(), " proposals for ",
               queries.size(), " queries");
  for (const DraftInput& q : queries)
    TROUPE_CHECK(q.bonus >= 0 && q.bonus < c_.vocab_size, "draft: bonus token ", q.bonus,
                 " out of range");
  const scratch_vector<float> h = hidden_rows(queries, routed);
  const int64_t slot_rows = c_.dspark_block_size * c_.hidden_size;
  for (size_t i = 0; i < queries.size(); ++i)
    finish(queries[i], &h[i * slot_rows], out[i], conf_min, nullptr);
}

void DsparkDraft::finish(const DraftInput& q, const float* h, DraftProposal& out, float conf_min,
                         const TraceFn& trace) const {
  const int64_t H = c_.hidden_size;
  const ScopedOp op(Op::Head);  // the base logits and the Markov loop
  const int64_t k = std::clamp<int64_t>(std::min(q.k, c_.dspark_block_size - 1), 0,
                                        c_.max_position_embeddings - 2 - q.anchor);
  scratch_vector<float> hn(h, h + (k + 1) * H);
  rms_norm_rows(hn.data(), k + 1, H, w_.norm, c_.rms_norm_eps);
  scratch_vector<float> base;  // [k, V] head · hn of slots 1..k, one GEMM for all of them
  if (k > 0) base = linear(hn.data() + H, k, target_.head);
  out.tokens.clear();
  out.confidence.resize(static_cast<size_t>(k + 1));
  MarkovLoop(c_, w_, h, base.data(), trace).run(q.anchor_token, q.bonus, k, conf_min, out);
}

}  // namespace troupe::model
