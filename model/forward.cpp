// The V4.1 forward pass (MODEL.md §5.1-5.2), top to bottom:
//
//   X = repeat(embed[tok], hc); pre = onehot(0)
//   for each layer: [Engram] -> HCMix(attn) -> Attn(RMSNorm(Σ pre X)) -> HCExpand
//                   -> HCMix(ffn) -> MoE(RMSNorm(Σ a_pre X)) -> HCExpand; pre = f_pre
//   logits = head · RMSNorm(HCHead(X))
#include "model/forward.h"

#include <cstring>

#include "kernels/check.h"
#include "kernels/quant.h"
#include "model/batch.h"
#include "model/csa.h"
#include "model/dspark_features.h"
#include "model/ffn_layers.h"
#include "model/hc.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

void validate(const ModelConfig& c, std::span<SequenceInput> batch) {
  TROUPE_CHECK(!batch.empty(), "forward: empty batch");
  for (const SequenceInput& in : batch) {
    TROUPE_CHECK(in.state != nullptr, "forward: sequence without state");
    if (in.tokens.empty()) TROUPE_FAIL("forward: a sequence has no tokens");
    for (int32_t t : in.tokens)
      if (t < 0 || t >= c.vocab_size)
        TROUPE_FAIL("token id " << t << " out of range [0, " << c.vocab_size << ")");
    if (in.first_position > in.state->length())
      TROUPE_FAIL("forward: first_position " << in.first_position << " is past the state's "
                                             << in.state->length() << " tokens");
    const int64_t end = in.start() + static_cast<int64_t>(in.tokens.size());
    if (in.window_rows_from >= 0 && (in.window_rows_from < in.start() || in.window_rows_from > end))
      TROUPE_FAIL("forward: window_rows_from " << in.window_rows_from << " outside the chunk ["
                                               << in.start() << ", " << end << "]");
    if (end > c.max_position_embeddings)
      TROUPE_FAIL("position " << end - 1 << " beyond max_position_embeddings "
                              << c.max_position_embeddings);
  }
}

Batch make_batch(std::span<SequenceInput> inputs, const TraceFn& trace) {
  Batch b;
  b.trace = &trace;
  b.begin.push_back(0);
  for (SequenceInput& in : inputs) {
    const int32_t s = static_cast<int32_t>(b.states.size());
    b.states.push_back(in.state);
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      b.seq.push_back(s);
      b.pos.push_back(in.start() + static_cast<int64_t>(i));
      b.token.push_back(in.tokens[i]);
    }
    b.begin.push_back(static_cast<int64_t>(b.pos.size()));
  }
  b.rows = static_cast<int64_t>(b.pos.size());
  return b;
}

// X[rows, hc, H] = the token embedding in every stream.
scratch_vector<float> embed(const ModelConfig& c, const ModelWeights& w, const Batch& b) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  ScopedOp op(Op::Embed);
  scratch_vector<float> X(b.rows * hc * H);
  for (int64_t r = 0; r < b.rows; ++r) {
    float* x = &X[r * hc * H];
    kernels::dequantize_rows(w.embed, b.token[r], 1, x);
    for (int64_t s = 1; s < hc; ++s) std::memcpy(x + s * H, x, H * sizeof(float));
  }
  return X;
}

}  // namespace

SequenceState SequenceState::empty(const ModelConfig& c) {
  SequenceState s;
  s.layout = KvRowLayout::of(c);
  s.layers.resize(c.num_hidden_layers);
  for (LayerState& l : s.layers) {
    l.window.assign(c.sliding_window * s.layout.window.bytes(), 0);
    l.window_pos.assign(c.sliding_window, -1);
  }
  return s;
}

int64_t SequenceState::global_kv_bytes() const {
  int64_t n = 0;
  for (const LayerState& l : layers) n += static_cast<int64_t>(l.ckv.size() + l.ikey.size());
  return n;
}

Batch Batch::subset(const scratch_vector<int64_t>& kept) const {
  Batch b;
  b.states = states;
  b.trace = trace;
  b.expert_precision = expert_precision;
  b.begin.assign(1, 0);
  size_t i = 0;
  for (int64_t s = 0; s < seqs(); ++s) {
    for (; i < kept.size() && seq[kept[i]] == s; ++i) {
      b.seq.push_back(static_cast<int32_t>(s));
      b.pos.push_back(pos[kept[i]]);
      b.token.push_back(token[kept[i]]);
    }
    b.begin.push_back(static_cast<int64_t>(b.pos.size()));
  }
  b.rows = static_cast<int64_t>(b.pos.size());
  return b;
}

void Batch::record(const char* name, int64_t layer, const float* data, int64_t n) const {
  if (!trace || !*trace) return;
  for (int64_t r = 0; r < rows; ++r) (*trace)(name, layer, r, {data + r * n, size_t(n)});
}

void Batch::record_ints(const char* name, int64_t layer, const int32_t* data, int64_t n) const {
  if (!trace || !*trace) return;
  scratch_vector<float> v(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(data[r * n + i]);
    (*trace)(name, layer, r, v);
  }
}

Forward::Forward(const ModelConfig& config, const ModelWeights& weights,
                 const DsparkWeights* dspark, ForwardOptions options)
    : cfg_(config), w_(weights), dspark_(dspark), options_(options), engram_(engram_hash_tables(config)),
      shape_(config) {
  const kernels::YarnScaling none;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    rope_freqs_.push_back(cfg_.ratio(l) == 0
        ? kernels::rope_frequencies(cfg_.rope_theta, cfg_.qk_rope_head_dim, none)
        : kernels::rope_frequencies(cfg_.compress_rope_theta, cfg_.qk_rope_head_dim,
                                    cfg_.rope_scaling));
  }
}

namespace {

// rows[kept.size(), width] <- rows[kept[i]] (kept ascending; in place is fine).
template <class T>
void keep_rows(scratch_vector<T>& v, const scratch_vector<int64_t>& kept, int64_t width) {
  for (size_t i = 0; i < kept.size(); ++i)
    std::copy_n(&v[kept[i] * width], width, &v[i * width]);
  v.resize(kept.size() * width);
}

// Layer Ne's window rows under bounded replay: [P, E) and the tail (§6.2), or from the
// caller's window_rows_from.
int64_t window_rows_from(const SequenceInput& in) {
  if (in.window_rows_from >= 0) return in.window_rows_from;
  const int64_t B = in.state->length();
  return in.decoder_tail_start < 0 ? B : std::min(B, in.decoder_tail_start);
}

// Rows that run past layer Ne: every row, or each sequence's tail (§6).
scratch_vector<int64_t> decoder_rows(std::span<SequenceInput> inputs, const Batch& b) {
  scratch_vector<int64_t> kept;
  for (int64_t r = 0; r < b.rows; ++r)
    if (b.pos[r] >= inputs[b.seq[r]].decoder_tail_start) kept.push_back(r);
  return kept;
}

}  // namespace

void Forward::run_idle(RoutedExperts& routed) const {
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l)
    routed.run(RoutedBatch::none(cfg_, w_.layers[l].ffn, l, cfg_.top_k, options_.expert_precision));
}

std::vector<std::vector<float>> Forward::run(std::span<SequenceInput> inputs,
                                             const TraceFn& trace, RoutedExperts* routed) const {
  std::vector<std::vector<float>> logits;
  run(inputs, logits, trace, routed);
  return logits;
}

void Forward::run(std::span<SequenceInput> inputs, std::vector<std::vector<float>>& logits,
                  const TraceFn& trace, RoutedExperts* routed) const {
  validate(cfg_, inputs);
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  Batch b = make_batch(inputs, trace);
  b.expert_precision = options_.expert_precision;
  scratch_vector<float> X = embed(c, w_, b);
  scratch_vector<float> pre(b.rows * hc, 0.0f);
  for (int64_t r = 0; r < b.rows; ++r) pre[r * hc] = 1.0f;
  scratch_vector<float> x(b.rows * H), y(b.rows * H);
  Selections sel(c.num_hidden_layers);
  FeatureCapture features(c, dspark_, b);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    const LayerContext ctx{c, L.attn, l, rope_freqs_[l], b};
    if (L.has_engram) engram_layer(c, w_, L.engram, engram_, l, b, X.data());
    hc_premix(c, X.data(), pre.data(), b.rows, x.data());
    rms_norm_rows(x.data(), b.rows, H, L.attn_norm, c.rms_norm_eps);
    b.record("attn_in", l, x.data(), H);
    const scratch_vector<int64_t> kept =
        l == c.n_encoder_layers ? decoder_rows(inputs, b) : scratch_vector<int64_t>{};
    if (l == c.n_encoder_layers && static_cast<int64_t>(kept.size()) < b.rows) {
      // Layer Ne: KV rows and window rows for all rows, queries only for the tail; from
      // here on the batch is the tail.
      Batch tail = b.subset(kept);
      scratch_vector<float> xq = x;
      keep_rows(xq, kept, H);
      for (int64_t s = 0; s < b.seqs(); ++s) b.store_window_from.push_back(window_rows_from(inputs[s]));
      attention_layer(ctx, x.data(), tail, xq.data(), sel, y.data());
      keep_rows(X, kept, hc * H);
      keep_rows(pre, kept, hc);
      features.keep_rows(kept);
      if (static_cast<int64_t>(sel.cand.size()) == b.rows) keep_rows(sel.cand, kept, 1);
      b = std::move(tail);
      x.resize(b.rows * H);
      y.resize(b.rows * H);
    } else {
      attention_layer(ctx, x.data(), b, x.data(), sel, y.data());
    }
    b.record("attn_out", l, y.data(), H);
    const HcMix a = hc_mix(c, L.hc_attn, X.data(), b.rows);
    hc_expand(c, y.data(), a, b.rows, X.data());

    const HcMix f = hc_mix(c, L.hc_ffn, X.data(), b.rows);
    hc_premix(c, X.data(), a.pre.data(), b.rows, x.data());
    rms_norm_rows(x.data(), b.rows, H, L.ffn_norm, c.rms_norm_eps);
    moe_layer(c, L.ffn, l, b, x.data(), y.data(), 0, routed);
    hc_expand(c, y.data(), f, b.rows, X.data());
    pre = f.pre;
    features.after_layer(l, X.data(), pre.data(), b.rows);
    b.record("X", l, X.data(), hc * H);
    b.record("pre", l, pre.data(), hc);
  }

  features.store(b);
  // Logits for the rows each sequence asked for (of the rows that ran every layer).
  logits.resize(inputs.size());
  for (int64_t s = 0; s < b.seqs(); ++s) {
    SequenceInput& in = inputs[s];
    const int64_t replayed = in.state->length() - in.start();  // tokens already in the state
    in.state->advance(in.tokens.subspan(static_cast<size_t>(replayed)));
    logits[s].clear();
    if (b.rows_of(s) == 0) continue;
    ScopedOp op(Op::Head);
    const int64_t r1 = b.begin[s + 1];
    const int64_t r0 = inputs[s].all_logits ? b.begin[s] : r1 - 1;
    scratch_vector<float> h((r1 - r0) * H);
    hc_head(c, w_, &X[r0 * hc * H], r1 - r0, h.data());
    rms_norm_rows(h.data(), r1 - r0, H, w_.norm, c.rms_norm_eps);
    logits[s].resize((r1 - r0) * w_.head.rows);
    linear(h.data(), r1 - r0, w_.head, logits[s].data());
  }
}

}  // namespace troupe::model
