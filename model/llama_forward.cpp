#include "model/llama_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/check.h"
#include "kernels/moe.h"
#include "kernels/rope.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

using Vec = std::vector<float>;

// RMSNorm of x's rows into a new buffer (x stays the residual stream).
Vec normed(const Vec& x, int64_t rows, int64_t n, const Vec& weight, float eps) {
  Vec out = x;
  rms_norm_rows(out.data(), rows, n, weight, eps);
  return out;
}

// Causal GQA attention over the cache (the shared attention kernel, MODEL.md §5.3, has
// K = V, so LLaMA's separate V goes through this loop until a GQA kernel exists).
// q [T, H, hd] for positions start.., caches [start + T, KV, hd]; out [T, H, hd].
void causal_attention(const Vec& q, const Vec& k, const Vec& v, int64_t start, int64_t T,
                      int64_t H, int64_t KV, int64_t hd, Vec& out) {
  out.assign(static_cast<size_t>(T * H * hd), 0.0f);
  const int64_t group = H / KV, kv_stride = KV * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Vec score(static_cast<size_t>(start + T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t keys = start + t + 1;
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q.data() + (t * H + h) * hd;
      const int64_t g = h / group;
      float mx = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        const float* kj = k.data() + j * kv_stride + g * hd;
        float s = 0;
        for (int64_t d = 0; d < hd; ++d) s += qh[d] * kj[d];
        score[j] = s * scale;
        mx = std::max(mx, score[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < keys; ++j) sum += score[j] = std::exp(score[j] - mx);
      float* oh = out.data() + (t * H + h) * hd;
      for (int64_t j = 0; j < keys; ++j) {
        const float pj = score[j] / sum;
        const float* vj = v.data() + j * kv_stride + g * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] += pj * vj[d];
      }
    }
  }
}

}  // namespace

void route_softmax_topk(const float* logits, int64_t experts, int64_t k, int32_t* pick,
                        float* weight) {
  std::vector<int32_t> order(static_cast<size_t>(experts));
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
  for (int64_t i = 0; i < k; ++i) weight[i] /= sum;
}

LlamaState LlamaState::empty(const LlamaConfig& c) {
  LlamaState s;
  s.k.resize(static_cast<size_t>(c.layers));
  s.v.resize(static_cast<size_t>(c.layers));
  return s;
}

LlamaForward::LlamaForward(const LlamaConfig& config, const LlamaWeights& weights)
    : cfg_(config), w_(weights),
      rope_freqs_(kernels::rope_frequencies(config.rope_base, config.head_dim, {})) {
  TROUPE_CHECK(static_cast<int64_t>(weights.layers.size()) == config.layers,
               "LlamaForward: ", weights.layers.size(), " layers of weights for ", config.layers);
}

void LlamaForward::attention_block(const LlamaLayerWeights& lw, Vec& k_cache, Vec& v_cache,
                                   int64_t start, Vec& x) const {
  const int64_t T = static_cast<int64_t>(x.size()) / cfg_.dim, H = cfg_.heads, KV = cfg_.kv_heads,
                hd = cfg_.head_dim;
  const Vec attn_in = normed(x, T, cfg_.dim, lw.attn_norm, cfg_.rms_eps);
  Vec q = linear(attn_in.data(), T, lw.wq.view());  // [T, H, hd]
  Vec k = linear(attn_in.data(), T, lw.wk.view());  // [T, KV, hd]
  const Vec v = linear(attn_in.data(), T, lw.wv.view());
  std::vector<int64_t> positions(static_cast<size_t>(T));
  std::iota(positions.begin(), positions.end(), start);
  rope_rows(q.data(), T * H, hd, hd, positions.data(), H, rope_freqs_);
  rope_rows(k.data(), T * KV, hd, hd, positions.data(), KV, rope_freqs_);
  k_cache.insert(k_cache.end(), k.begin(), k.end());
  v_cache.insert(v_cache.end(), v.begin(), v.end());
  Vec attn;
  causal_attention(q, k_cache, v_cache, start, T, H, KV, hd, attn);
  const Vec attn_out = linear(attn.data(), T, lw.wo.view());
  for (size_t i = 0; i < x.size(); ++i) x[i] += attn_out[i];
}

void LlamaForward::ffn_block(const LlamaLayerWeights& lw, Vec& x) const {
  const int64_t T = static_cast<int64_t>(x.size()) / cfg_.dim, D = cfg_.dim, F = cfg_.ffn_dim;
  const Vec ffn_in = normed(x, T, D, lw.ffn_norm, cfg_.rms_eps);
  const int64_t E = cfg_.is_moe() ? cfg_.experts : 1, top_k = cfg_.is_moe() ? cfg_.experts_used : 1;
  std::vector<kernels::ExpertWeights> experts(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    experts[e] = {lw.gate.slice(e * F, F), lw.up.slice(e * F, F), lw.down.slice(e * D, D)};
  // A dense MLP is one expert every row picks with weight 1 (1·y is y exactly).
  std::vector<int32_t> pick(static_cast<size_t>(T * top_k), 0);
  Vec weight(static_cast<size_t>(T * top_k), 1.0f);
  if (cfg_.is_moe()) {
    const Vec router_logits = linear(ffn_in.data(), T, lw.router.view());  // [T, E]
    for (int64_t t = 0; t < T; ++t)
      route_softmax_topk(router_logits.data() + t * E, E, top_k, pick.data() + t * top_k,
                         weight.data() + t * top_k);
  }
  kernels::MoeExpertsParams mp;
  mp.x = ffn_in.data();
  mp.pick = pick.data();
  mp.weight = weight.data();
  mp.experts = experts.data();
  mp.out = x.data();
  mp.m = T;
  mp.hidden = D;
  mp.inter = F;
  mp.experts_count = E;
  mp.top_k = top_k;
  kernels::moe_experts(mp);
}

std::vector<float> LlamaForward::run(LlamaState& state, std::span<const int32_t> tokens,
                                     bool all_logits) const {
  const int64_t T = static_cast<int64_t>(tokens.size()), D = cfg_.dim, V = cfg_.vocab_size;
  if (T == 0) TROUPE_FAIL("LlamaForward: no tokens");
  for (int32_t id : tokens)
    if (id < 0 || id >= V) TROUPE_FAIL("token id " << id << " is outside the vocabulary [0, " << V << ")");
  const int64_t start = state.length;
  if (start + T > cfg_.context_length)
    TROUPE_FAIL(start + T << " positions exceed the context length " << cfg_.context_length);
  TROUPE_CHECK(static_cast<int64_t>(state.k.size()) == cfg_.layers, "LlamaForward: state has ",
               state.k.size(), " layers, the model ", cfg_.layers);

  Vec x(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t)
    kernels::dequantize_rows(w_.token_embd.view(), tokens[t], 1, x.data() + t * D);
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    attention_block(w_.layers[l], state.k[l], state.v[l], start, x);
    ffn_block(w_.layers[l], x);
  }
  state.length = start + T;

  const int64_t rows = all_logits ? T : 1;
  const Vec last(x.end() - rows * D, x.end());
  const Vec out_in = normed(last, rows, D, w_.output_norm, cfg_.rms_eps);
  return linear(out_in.data(), rows, w_.output_view());
}

}  // namespace troupe::model
