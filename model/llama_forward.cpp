#include "model/llama_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/causal_attention.h"
#include "kernels/check.h"
#include "kernels/moe.h"
#include "kernels/parallel.h"
#include "kernels/rope.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

using Vec = std::vector<float>;
using Rows = kernels::scratch_vector<float>;  // LlamaForward::Rows
using Normed = kernels::scratch_buffer<float>;  // LlamaForward::Normed

// RMSNorm of x's rows into a new buffer (x stays the residual stream). Out of place and
// not zeroed first: a copy of x ahead of the norm was a pass over all the step's
// activations on the calling thread alone (~1.6% of a pp512 on the peer bench's MoE).
Normed normed(const Rows& x, int64_t rows, int64_t n, const Vec& weight, float eps) {
  Normed out(x.size());
  rms_norm_rows(x.data(), out.data(), rows, n, weight, eps);
  return out;
}

// Eight partial sums in a fixed order: vectorisable without -ffast-math.
float dot(const float* a, const float* b, int64_t n) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  for (int j = 0; i + j < n; ++j) part[j] += a[i + j] * b[i + j];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

// rows[t, :] += bias for each of the rows (a no-op for an empty bias).
template <class V>
void add_bias(V& rows, const Vec& bias) {
  if (bias.empty()) return;
  const size_t n = bias.size();
  for (size_t i = 0; i < rows.size(); ++i) rows[i] += bias[i % n];
}

// out += Σ_k weight · Expert_pick(x) over T rows (kernels::moe_experts; a dense MLP or a
// shared expert is one expert).
void run_experts(const Normed& x, int64_t T, int64_t D, int64_t inter, const ExpertTable& experts,
                 int64_t top_k, const kernels::scratch_vector<int32_t>& pick, const Rows& weight,
                 Rows& out) {
  kernels::MoeExpertsParams mp;
  mp.x = x.data();
  mp.pick = pick.data();
  mp.weight = weight.data();
  mp.experts = experts.data();
  mp.out = out.data();
  mp.m = T;
  mp.hidden = D;
  mp.inter = inter;
  mp.experts_count = static_cast<int64_t>(experts.size());
  mp.top_k = top_k;
  kernels::moe_experts(mp);
}

}  // namespace

void route_softmax_topk(const float* logits, int64_t experts, int64_t k, int32_t* pick,
                        float* weight, bool renormalize) {
  kernels::scratch_vector<int32_t> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float mx = logits[order[0]];
  float sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    pick[i] = order[static_cast<size_t>(i)];
    weight[i] = std::exp(logits[pick[i]] - mx);
    sum += weight[i];
  }
  if (!renormalize) {  // the softmax's denominator over every expert
    sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += std::exp(logits[e] - mx);
  }
  for (int64_t i = 0; i < k; ++i) weight[i] /= sum;
}

LlamaState LlamaState::empty(const LlamaConfig& c) {
  LlamaState s;
  s.k.resize(static_cast<size_t>(c.layers));
  s.v.resize(static_cast<size_t>(c.layers));
  return s;
}

ServingShape llama_serving_shape(const LlamaConfig& c) {
  ServingShape s;
  s.vocab_size = c.vocab_size;
  s.max_positions = c.context_length;
  s.eos_token_id = c.eos_token_id;
  s.layers = c.layers;
  s.ratio.assign(size_t(c.layers), 1);
  s.holds_rows.assign(size_t(c.layers), 1);
  const int64_t kv_row = c.kv_heads * c.head_dim;
  s.rows = {{RowFormat::F32, 0}, {RowFormat::F32, 2 * kv_row}, {RowFormat::F32, 0}};
  // A block holds KV head 0's K rows in one run, then its V rows, then head 1's ... (store_kv).
  s.rows.ckv_pieces = 2 * c.kv_heads;
  s.window = 0;
  s.carry_width = c.head_dim;  // never carried (ratio 1): a slot state's carry must be empty
  s.feature_width = c.dim;
  s.kv_bytes_per_token = double(c.layers * s.rows.ckv.bytes());
  s.expert_parallel = c.is_moe();  // the routed experts spread over ranks (LlamaForward::run)
  // A -1 names the family in the disk tier's tag, apart from every V4.1 shape.
  s.tag_head = {-1, c.vocab_size, c.dim, c.layers, c.heads, c.kv_heads, c.head_dim,
                c.ffn_dim, c.experts, c.experts_used, int64_t(c.arch), c.shared_ffn_dim,
                c.rope_neox, c.qkv_bias};
  s.tag_head.push_back(s.rows.ckv_pieces);  // files of whole rows (earlier builds) miss
  return s;
}

LlamaForward::LlamaForward(const LlamaConfig& config, const LlamaWeights& weights)
    : cfg_(config), w_(weights),
      rope_freqs_(kernels::rope_frequencies(config.rope_base, config.head_dim, {})),
      shape_(llama_serving_shape(config)) {
  TROUPE_CHECK(static_cast<int64_t>(weights.layers.size()) == config.layers,
               "LlamaForward: ", weights.layers.size(), " layers of weights for ", config.layers);
  const int64_t E = config.is_moe() ? config.experts : 1;
  for (const LlamaLayerWeights& lw : weights.layers) {
    ExpertTable& t = experts_.emplace_back();
    for (int64_t e = 0; e < E; ++e) t.push_back(lw.expert(e, config.ffn_dim, config.dim));
    ExpertTable& shared = shared_.emplace_back();
    if (config.has_shared_expert())
      shared.push_back({lw.shared_gate.view(), lw.shared_up.view(), lw.shared_down.view()});
  }
}

MoeLayers LlamaForward::routed_layers() const {
  MoeLayers layers;
  if (cfg_.is_moe())
    for (const ExpertTable& t : experts_) layers.push_back(&t);
  return layers;
}

RoutedBatch LlamaForward::routed_batch(int64_t layer) const {
  RoutedBatch b;
  b.experts = &experts_[size_t(layer)];
  b.layer = layer;
  b.top_k = cfg_.experts_used;
  b.hidden = cfg_.dim;
  b.inter = cfg_.ffn_dim;
  return b;  // no SwiGLU clamp, f32 GEMM precision: as run_experts runs them here
}

void LlamaForward::attention_block(const LlamaLayerWeights& lw, int64_t layer,
                                   std::span<const Segment> segs, Rows& x) const {
  const int64_t T = static_cast<int64_t>(x.size()) / cfg_.dim, H = cfg_.heads, KV = cfg_.kv_heads,
                hd = cfg_.head_dim;
  std::optional<ScopedOp> op(std::in_place, Op::AttnQuery);  // norm, q / k / v, rope
  const Normed attn_in = normed(x, T, cfg_.dim, lw.attn_norm, cfg_.rms_eps);
  kernels::scratch_buffer<float> q(T * H * hd), k(T * KV * hd), v(T * KV * hd);  // [T, heads, hd]
  linear_shared_x(attn_in.data(), T, {{lw.wq.view(), q.data()}, {lw.wk.view(), k.data()}, {lw.wv.view(), v.data()}});
  add_bias(q, lw.bq);
  add_bias(k, lw.bk);
  add_bias(v, lw.bv);
  kernels::scratch_vector<int64_t> positions(static_cast<size_t>(T));
  for (const Segment& sg : segs)
    std::iota(positions.begin() + sg.row, positions.begin() + sg.row + sg.count, sg.start);
  rope_rows(q.data(), T * H, hd, hd, positions.data(), H, rope_freqs_, false, cfg_.rope_neox);
  rope_rows(k.data(), T * KV, hd, hd, positions.data(), KV, rope_freqs_, false, cfg_.rope_neox);
  op.emplace(Op::AttnStore);
  kernels::scratch_buffer<float> attn(T * H * hd);
  // All segments in one call, so a decode step of many sequences fills every thread.
  // The segments' key and value row pointers one after another (start + count each).
  int64_t keys = 0;
  for (const Segment& sg : segs) keys += sg.start + sg.count;
  kernels::scratch_buffer<const float*> krows(keys), vrows(keys);
  kernels::scratch_vector<kernels::CausalAttentionSeq> seqs;
  seqs.reserve(segs.size());
  int64_t first = 0;
  for (const Segment& sg : segs) {
    const int64_t head_stride = store_kv(sg, layer, k.data() + sg.row * KV * hd,
                                         v.data() + sg.row * KV * hd, &krows[first], &vrows[first]);
    seqs.push_back({q.data() + sg.row * H * hd, &krows[first], &vrows[first],
                    attn.data() + sg.row * H * hd, sg.count, sg.start, head_stride});
    first += sg.start + sg.count;
  }
  op.emplace(Op::AttnCore);
  kernels::causal_attention({seqs.data(), static_cast<int64_t>(seqs.size()), H, KV, hd,
                             1.0f / std::sqrt(static_cast<float>(hd))});
  // x += attn · woᵀ: the GEMM adds each output to x (the same f32 sum as adding after).
  op.emplace(Op::AttnOutput);
  kernels::GemmParams g;
  g.x = attn.data();
  g.w = lw.wo.view();
  g.y = x.data();
  g.m = T;
  g.accumulate = true;
  kernels::gemm(g);
}

void LlamaForward::ffn_block(const LlamaLayerWeights& lw, int64_t layer, Rows& x,
                             RoutedExperts* routed) const {
  const int64_t T = static_cast<int64_t>(x.size()) / cfg_.dim, D = cfg_.dim, F = cfg_.ffn_dim;
  std::optional<ScopedOp> op(std::in_place, Op::MoeGate);  // norm and routing
  const Normed ffn_in = normed(x, T, D, lw.ffn_norm, cfg_.rms_eps);
  const int64_t E = cfg_.is_moe() ? cfg_.experts : 1, top_k = cfg_.is_moe() ? cfg_.experts_used : 1;
  // A dense MLP is one expert every row picks with weight 1 (1·y is y exactly).
  kernels::scratch_vector<int32_t> pick(static_cast<size_t>(T * top_k), 0);
  Rows weight(static_cast<size_t>(T * top_k), 1.0f);
  if (cfg_.is_moe()) {
    const auto router_logits = linear(ffn_in.data(), T, lw.router.view());  // [T, E]
    // Each token's pick on its own, over the threads (a serial loop here left them idle).
    kernels::parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        route_softmax_topk(router_logits.data() + t * E, E, top_k, pick.data() + t * top_k,
                           weight.data() + t * top_k, cfg_.renormalize_topk);
    });
  }
  op.emplace(Op::RoutedExperts);  // a dense model's MLP too
  if (routed != nullptr) {  // expert parallel: x += the same sum, from wherever each expert is
    RoutedBatch b = routed_batch(layer);
    b.x = ffn_in.data();
    b.rows = T;
    b.pick = pick.data();
    b.weight = weight.data();
    b.out = x.data();
    routed->run(b);
  } else {
    run_experts(ffn_in, T, D, F, experts_[size_t(layer)], top_k, pick, weight, x);
  }
  if (cfg_.has_shared_expert()) {
    op.emplace(Op::SharedExpert);
    shared_expert(layer, ffn_in, x);
  }
}

// qwen2moe's shared expert: one more expert every row takes, weighted by its gate
// sigmoid(ffn_in · w_gate_shexp) (llama.cpp: silu(g) / g).
void LlamaForward::shared_expert(int64_t layer, const Normed& ffn_in, Rows& x) const {
  const LlamaLayerWeights& lw = w_.layers[size_t(layer)];
  const int64_t D = cfg_.dim, T = static_cast<int64_t>(ffn_in.size()) / D;
  Rows gate(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    gate[t] = 1.0f / (1.0f + std::exp(-dot(ffn_in.data() + t * D, lw.shared_gate_inp.data(), D)));
  const kernels::scratch_vector<int32_t> pick(size_t(T), 0);
  run_experts(ffn_in, T, D, cfg_.shared_ffn_dim, shared_[size_t(layer)], 1, pick, gate, x);
}

int64_t LlamaForward::store_kv(const Segment& sg, int64_t layer, const float* k, const float* v,
                               const float** krows, const float** vrows) const {
  const int64_t kv_row = cfg_.kv_heads * cfg_.head_dim, keys = sg.start + sg.count;
  if (sg.state != nullptr) {
    Vec& k_cache = sg.state->k[layer];
    Vec& v_cache = sg.state->v[layer];
    k_cache.insert(k_cache.end(), k, k + sg.count * kv_row);
    v_cache.insert(v_cache.end(), v, v + sg.count * kv_row);
    for (int64_t j = 0; j < keys; ++j) {
      krows[j] = k_cache.data() + j * kv_row;
      vrows[j] = v_cache.data() + j * kv_row;
    }
    return 0;  // heads side by side
  }
  // The paged row of a token: each KV head's K then its V, f32 as computed, in
  // 2·kv_heads pieces of head_dim (llama_serving_shape). The store lays a block out by
  // piece, so KV head g's K rows of the block are one run and its V rows the next:
  // attention reads a head's keys and values as one stretch a block, which the hardware
  // prefetcher follows (docs/kernels-bench.md "head-major": decode attention 1.2-1.5x
  // faster than over whole rows on a Zen 5; K and V runs of a head further apart
  // gained less).
  const int64_t hd = cfg_.head_dim;
  kernels::scratch_buffer<float> row(2 * kv_row);
  for (int64_t t = 0; t < sg.count; ++t) {
    for (int64_t g = 0; g < cfg_.kv_heads; ++g) {
      std::copy_n(k + t * kv_row + g * hd, hd, row.begin() + 2 * g * hd);
      std::copy_n(v + t * kv_row + g * hd, hd, row.begin() + (2 * g + 1) * hd);
    }
    sg.paged->append_row(layer, reinterpret_cast<const uint8_t*>(row.data()), nullptr);
  }
  const int64_t run = sg.paged->ckv_piece_stride(layer) / int64_t(sizeof(float));
  for (int64_t j = 0; j < keys; ++j) {
    // The block bytes hold floats written just so (the row above, or an earlier step's).
    krows[j] = reinterpret_cast<const float*>(sg.paged->ckv_row(layer, j));
    vrows[j] = krows[j] + run;
  }
  return 2 * run;  // from head g's K run to head g + 1's
}

void LlamaForward::check_tokens(std::span<const int32_t> tokens) const {
  if (tokens.empty()) TROUPE_FAIL("LlamaForward: no tokens");
  for (int32_t id : tokens)
    if (id < 0 || id >= cfg_.vocab_size)
      TROUPE_FAIL("token id " << id << " is outside the vocabulary [0, " << cfg_.vocab_size << ")");
}

std::vector<float> LlamaForward::run(LlamaState& state, std::span<const int32_t> tokens,
                                     bool all_logits) const {
  check_tokens(tokens);
  const int64_t T = static_cast<int64_t>(tokens.size()), start = state.length;
  if (start + T > cfg_.context_length)
    TROUPE_FAIL(start + T << " positions exceed the context length " << cfg_.context_length);
  TROUPE_CHECK(static_cast<int64_t>(state.k.size()) == cfg_.layers, "LlamaForward: state has ",
               state.k.size(), " layers, the model ", cfg_.layers);
  const Segment seg{&state, nullptr, 0, T, start, all_logits};
  const Rows logits = forward(std::span(&seg, 1), tokens);
  return {logits.begin(), logits.end()};
}

std::vector<float> LlamaForward::decode(std::span<LlamaState* const> states,
                                        std::span<const int32_t> tokens) const {
  check_tokens(tokens);
  TROUPE_CHECK(states.size() == tokens.size(), "LlamaForward::decode: ", states.size(),
               " states for ", tokens.size(), " tokens");
  std::vector<Segment> segs;
  for (size_t i = 0; i < states.size(); ++i) {
    LlamaState* s = states[i];
    TROUPE_CHECK(s != nullptr && static_cast<int64_t>(s->k.size()) == cfg_.layers,
                 "LlamaForward::decode: state ", i, " is null or not this model's");
    for (size_t j = 0; j < i; ++j)
      TROUPE_CHECK(states[j] != s, "LlamaForward::decode: state ", i, " is also state ", j);
    if (s->length + 1 > cfg_.context_length)
      TROUPE_FAIL(s->length + 1 << " positions exceed the context length " << cfg_.context_length);
    segs.push_back({s, nullptr, static_cast<int64_t>(i), 1, s->length, true});
  }
  const Rows logits = forward(segs, tokens);
  return {logits.begin(), logits.end()};
}

void LlamaForward::run(std::span<SequenceInput> batch, std::vector<std::vector<float>>& logits,
                       const TraceFn& trace, RoutedExperts* routed) const {
  (void)trace;  // no named intermediates recorded yet
  TROUPE_CHECK(routed == nullptr || cfg_.is_moe(), "LlamaForward: a dense model has no "
               "experts to run expert-parallel");
  kernels::scratch_vector<Segment> segs;
  kernels::scratch_vector<int32_t> tokens;
  segs.reserve(batch.size());
  size_t total = 0;
  for (const SequenceInput& in : batch) total += in.tokens.size();
  tokens.reserve(total);
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceInput& in = batch[i];
    TROUPE_CHECK(in.state != nullptr, "LlamaForward: sequence ", i, " has no state");
    TROUPE_CHECK(in.decoder_tail_start < 0 && in.start() == in.state->length(),
                 "LlamaForward: sequence ", i, " asks for a decoder tail or a replay (V4.1 only)");
    check_tokens(in.tokens);
    const int64_t start = in.state->length(), T = static_cast<int64_t>(in.tokens.size());
    if (start + T > cfg_.context_length)
      TROUPE_FAIL(start + T << " positions exceed the context length " << cfg_.context_length);
    segs.push_back({nullptr, in.state, static_cast<int64_t>(tokens.size()), T, start, in.all_logits});
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
  }
  logits.resize(batch.size());
  if (batch.empty()) return;
  const Rows all = forward(segs, tokens, routed);
  const int64_t V = w_.output_view().rows;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t rows = segs[i].all_logits ? segs[i].count : 1;
    logits[i].assign(all.begin() + row * V, all.begin() + (row + rows) * V);
    row += rows;
    batch[i].state->advance(batch[i].tokens);
  }
}

void LlamaForward::run_idle(RoutedExperts& routed) const {
  if (!cfg_.is_moe()) TROUPE_FAIL("LlamaForward: a dense model has no experts to run expert-parallel");
  for (int64_t l = 0; l < cfg_.layers; ++l) routed.run(routed_batch(l));
}

// The layers on every row of the step; each segment's state grows by its rows.
LlamaForward::Rows LlamaForward::forward(std::span<const Segment> segs, std::span<const int32_t> tokens,
                                         RoutedExperts* routed) const {
  const int64_t T = static_cast<int64_t>(tokens.size()), D = cfg_.dim;
  Rows x(static_cast<size_t>(T * D));
  std::optional<ScopedOp> op(std::in_place, Op::Embed);
  for (int64_t t = 0; t < T; ++t)
    kernels::dequantize_rows(w_.token_embd.view(), tokens[t], 1, x.data() + t * D);
  op.reset();
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    attention_block(w_.layers[l], l, segs, x);
    ffn_block(w_.layers[l], l, x, routed);
  }
  op.emplace(Op::Head);
  int64_t rows = 0;  // the rows whose logits are asked for, in segment order
  for (const Segment& sg : segs) rows += sg.all_logits ? sg.count : 1;
  Rows last;
  last.reserve(rows * D);
  for (const Segment& sg : segs) {
    if (sg.state != nullptr) sg.state->length = sg.start + sg.count;
    const int64_t first = sg.all_logits ? sg.row : sg.row + sg.count - 1;
    last.insert(last.end(), x.begin() + first * D, x.begin() + (sg.row + sg.count) * D);
  }
  const Normed out_in = normed(last, rows, D, w_.output_norm, cfg_.rms_eps);
  Rows logits(static_cast<size_t>(rows * w_.output_view().rows));
  linear(out_in.data(), rows, w_.output_view(), logits.data());
  return logits;
}

}  // namespace troupe::model
