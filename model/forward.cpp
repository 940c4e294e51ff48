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
#include "model/ffn_layers.h"
#include "model/hc.h"
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
    const int64_t end = in.state->length + static_cast<int64_t>(in.tokens.size());
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
      b.pos.push_back(in.state->length + static_cast<int64_t>(i));
      b.token.push_back(in.tokens[i]);
    }
    in.state->tokens.insert(in.state->tokens.end(), in.tokens.begin(), in.tokens.end());
    b.begin.push_back(static_cast<int64_t>(b.pos.size()));
  }
  b.rows = static_cast<int64_t>(b.pos.size());
  return b;
}

// X[rows, hc, H] = the token embedding in every stream.
std::vector<float> embed(const ModelConfig& c, const ModelWeights& w, const Batch& b) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  std::vector<float> X(b.rows * hc * H);
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
  s.rows = KvRowLayout::of(c);
  s.layers.resize(c.num_hidden_layers);
  for (LayerState& l : s.layers) l.window.assign(c.sliding_window * s.rows.window.bytes(), 0);
  return s;
}

int64_t SequenceState::global_kv_bytes() const {
  int64_t n = 0;
  for (const LayerState& l : layers) n += static_cast<int64_t>(l.ckv.size() + l.ikey.size());
  return n;
}

void Batch::record(const char* name, int64_t layer, const float* data, int64_t n) const {
  if (!trace || !*trace) return;
  for (int64_t r = 0; r < rows; ++r) (*trace)(name, layer, r, {data + r * n, size_t(n)});
}

void Batch::record_ints(const char* name, int64_t layer, const int32_t* data, int64_t n) const {
  if (!trace || !*trace) return;
  std::vector<float> v(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(data[r * n + i]);
    (*trace)(name, layer, r, v);
  }
}

Forward::Forward(const ModelConfig& config, const ModelWeights& weights)
    : cfg_(config), w_(weights), engram_(engram_hash_tables(config)) {
  const kernels::YarnScaling none;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    rope_freqs_.push_back(cfg_.ratio(l) == 0
        ? kernels::rope_frequencies(cfg_.rope_theta, cfg_.qk_rope_head_dim, none)
        : kernels::rope_frequencies(cfg_.compress_rope_theta, cfg_.qk_rope_head_dim,
                                    cfg_.rope_scaling));
  }
}

std::vector<std::vector<float>> Forward::run(std::span<SequenceInput> inputs,
                                             const TraceFn& trace) const {
  validate(cfg_, inputs);
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  Batch b = make_batch(inputs, trace);
  const int64_t rows = b.rows;
  std::vector<float> X = embed(c, w_, b);
  std::vector<float> pre(rows * hc, 0.0f);
  for (int64_t r = 0; r < rows; ++r) pre[r * hc] = 1.0f;
  std::vector<float> x(rows * H), y(rows * H);
  Selections sel(c.num_hidden_layers);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    if (L.has_engram) engram_layer(c, w_, L.engram, engram_, l, b, X.data());
    const HcMix a = hc_mix(c, L.hc_attn, X.data(), rows);
    hc_premix(c, X.data(), pre.data(), rows, x.data());
    rms_norm_rows(x.data(), rows, H, L.attn_norm, c.rms_norm_eps);
    b.record("attn_in", l, x.data(), H);
    attention_layer({c, L.attn, l, rope_freqs_[l], b}, x.data(), sel, y.data());
    b.record("attn_out", l, y.data(), H);
    hc_expand(c, y.data(), a, rows, X.data());

    const HcMix f = hc_mix(c, L.hc_ffn, X.data(), rows);
    hc_premix(c, X.data(), a.pre.data(), rows, x.data());
    rms_norm_rows(x.data(), rows, H, L.ffn_norm, c.rms_norm_eps);
    moe_layer(c, L.ffn, l, b, x.data(), y.data());
    hc_expand(c, y.data(), f, rows, X.data());
    pre = f.pre;
    b.record("X", l, X.data(), hc * H);
    b.record("pre", l, pre.data(), hc);
  }

  // Logits for the rows each sequence asked for.
  std::vector<std::vector<float>> logits(inputs.size());
  for (int64_t s = 0; s < b.seqs(); ++s) {
    const int64_t r1 = b.begin[s + 1];
    const int64_t r0 = inputs[s].all_logits ? b.begin[s] : r1 - 1;
    std::vector<float> h((r1 - r0) * H);
    hc_head(c, w_, &X[r0 * hc * H], r1 - r0, h.data());
    rms_norm_rows(h.data(), r1 - r0, H, w_.norm, c.rms_norm_eps);
    logits[s] = linear(h.data(), r1 - r0, w_.head);
    inputs[s].state->length += r1 - b.begin[s];
  }
  return logits;
}

}  // namespace troupe::model
