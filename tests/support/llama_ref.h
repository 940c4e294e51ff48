// A plain reference of the LLaMA architecture (double loops, full recompute of every
// position, no KV cache) and the small random-weight GGUF files the tests write for it,
// with Qwen2's pieces (q/k/v biases, NEOX RoPE) and Qwen2-MoE's (routing weights not
// renormalised, a shared expert behind a sigmoid gate). The reference follows
// llama.cpp's formulation where troupe's differs in form: MoE routing is a softmax over
// all experts, top-k, then (Mixtral) renormalised over the k; the shared expert's gate is
// silu(g) / g.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/gguf_dequant.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"
#include "support/ggml_ref.h"

namespace troupe::testing {

using DVec = std::vector<double>;

// x as the q8_0 GEMM sees it (kernels/ggml_blocks.h, llama.cpp's numerics): per block of
// 32, f32 d = amax / 127, q = round-to-even(x / d) with f32 arithmetic, times f16(d).
inline DVec ref_q8_activations(const DVec& x) {
  DVec out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(float(x[i])));
    const float d = amax / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
    const double d16 = model::f16_to_f32(model::f32_to_f16(d));
    for (size_t i = b; i < b + 32; ++i) out[i] = double(std::nearbyint(float(x[i]) * inv)) * d16;
  }
  return out;
}

struct RefMatrix {
  int64_t rows = 0, cols = 0;
  DVec w;  // row-major
  bool q8_input = false;  // stored as Q8_0 / Q4_0: the GEMM quantizes x to q8_0 first
  DVec apply(const DVec& x_in) const {  // W · x
    const DVec x = q8_input ? ref_q8_activations(x_in) : x_in;
    DVec y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
    return y;
  }
};

struct RefLayer {
  DVec attn_norm, ffn_norm;
  DVec bq, bk, bv;  // empty: no bias
  RefMatrix wq, wk, wv, wo, router;
  std::vector<RefMatrix> gate, up, down;  // one per expert (one for a dense MLP)
  RefMatrix sh_gate, sh_up, sh_down;      // the shared expert (qwen2moe)
  DVec sh_gate_inp;                       // [D]; empty: no shared expert
};

struct RefLlama {
  int64_t V = 0, D = 0, L = 0, F = 0, H = 0, KV = 0, hd = 0, E = 0, K = 0;
  double theta = 10000, eps = 1e-5;
  bool neox = false;         // RoPE pairs (i, i + hd/2)
  bool renormalize = true;   // routing weights renormalised over the k picked
  RefMatrix embd, output;  // output = embd when tied
  DVec output_norm;
  std::vector<RefLayer> layers;
};

inline DVec ref_rms_norm(const DVec& x, const DVec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  DVec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Adjacent pairs (2i, 2i + 1) of each head rotate by pos * theta^(-2i / hd); with neox
// (GPT-NeoX / HF rotate_half) the pairs are (i, i + hd/2), same angles.
inline void ref_rope(DVec& x, int64_t heads, int64_t hd, int64_t pos, double theta,
                     bool neox = false) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(hd));
      double& x0 = x[h * hd + (neox ? i : 2 * i)];
      double& x1 = x[h * hd + (neox ? i + hd / 2 : 2 * i + 1)];
      const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
      x0 = r0;
      x1 = r1;
    }
}

inline DVec ref_swiglu_expert(const RefMatrix& g, const RefMatrix& u, const RefMatrix& d, const DVec& x) {
  DVec a = g.apply(x), b = u.apply(x);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];
  return d.apply(a);
}

inline DVec ref_ffn(const RefLlama& m, const RefLayer& l, const DVec& x) {
  if (m.E == 0) return ref_swiglu_expert(l.gate[0], l.up[0], l.down[0], x);
  DVec p = l.router.apply(x);
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& v : p) sum += v = std::exp(v - mx);
  for (double& v : p) v /= sum;
  std::vector<int> order(static_cast<size_t>(m.E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double picked = 0;
  for (int64_t k = 0; k < m.K; ++k) picked += p[order[k]];
  if (!m.renormalize) picked = 1;  // qwen2moe: the softmax's own probabilities
  DVec y(x.size(), 0.0);
  for (int64_t k = 0; k < m.K; ++k) {
    const int e = order[k];
    const DVec o = ref_swiglu_expert(l.gate[e], l.up[e], l.down[e], x);
    for (size_t i = 0; i < y.size(); ++i) y[i] += p[e] / picked * o[i];
  }
  if (!l.sh_gate_inp.empty()) {
    double g = 0;
    for (size_t i = 0; i < x.size(); ++i) g += l.sh_gate_inp[i] * x[i];
    const double gate = g / (1.0 + std::exp(-g)) / g;  // silu(g) / g, as llama.cpp
    const DVec o = ref_swiglu_expert(l.sh_gate, l.sh_up, l.sh_down, x);
    for (size_t i = 0; i < y.size(); ++i) y[i] += gate * o[i];
  }
  return y;
}

inline void ref_add(DVec& x, const DVec& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

// Logits of every position of tokens, [T][V].
inline std::vector<DVec> ref_llama_logits(const RefLlama& m, const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<DVec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    x[t] = DVec(m.embd.w.begin() + tokens[t] * m.D, m.embd.w.begin() + (tokens[t] + 1) * m.D);
  for (const RefLayer& l : m.layers) {
    std::vector<DVec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const DVec h = ref_rms_norm(x[t], l.attn_norm, m.eps);
      q[t] = l.wq.apply(h);
      k[t] = l.wk.apply(h);
      v[t] = l.wv.apply(h);
      ref_add(q[t], l.bq);
      ref_add(k[t], l.bk);
      ref_add(v[t], l.bv);
      ref_rope(q[t], m.H, m.hd, t, m.theta, m.neox);
      ref_rope(k[t], m.KV, m.hd, t, m.theta, m.neox);
    }
    for (int64_t t = 0; t < T; ++t) {
      DVec attn(static_cast<size_t>(m.H * m.hd), 0.0);
      for (int64_t h = 0; h < m.H; ++h) {
        const int64_t g = h / (m.H / m.KV);
        DVec s(static_cast<size_t>(t + 1));
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t d = 0; d < m.hd; ++d) s[j] += q[t][h * m.hd + d] * k[j][g * m.hd + d];
          s[j] /= std::sqrt(double(m.hd));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += e = std::exp(e - mx);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < m.hd; ++d) attn[h * m.hd + d] += s[j] / sum * v[j][g * m.hd + d];
      }
      const DVec o = l.wo.apply(attn);
      for (int64_t i = 0; i < m.D; ++i) x[t][i] += o[i];
      const DVec f = ref_ffn(m, l, ref_rms_norm(x[t], l.ffn_norm, m.eps));
      for (int64_t i = 0; i < m.D; ++i) x[t][i] += f[i];
    }
  }
  std::vector<DVec> logits(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) logits[t] = m.output.apply(ref_rms_norm(x[t], m.output_norm, m.eps));
  return logits;
}

// --- the test files ---------------------------------------------------------------------
struct TinyLlamaSpec {
  model::LlamaArch arch = model::LlamaArch::Llama;  // qwen2*: q/k/v biases and NEOX RoPE
  model::GgmlType type = model::GgmlType::F32;  // every matrix and the embedding; norms F32
  bool tied = false;                            // no output.weight
  int64_t experts = 0, top_k = 0;               // > 0: Mixtral-style stacked experts
  int64_t shared_ffn = 128;                     // qwen2moe: the shared expert's width
  uint32_t seed = 1;
  int64_t vocab = 80, dim = 64, layers = 2, ffn = 96, heads = 4, kv_heads = 2, context = 64;
  double theta = 10000.0;
  std::function<void(model::GgufWriter&)> more_metadata;  // e.g. a tokenizer
  std::string drop_tensor;  // a tensor left out of the file (tests of a missing one)
};

// A SentencePiece-style vocabulary for test files (`troupe serve` and --prompt need one):
// <unk>, <s> (bos), </s> (eos), the 256 byte tokens, then `pieces` with scores falling in
// id order. Returns the token count, the model's vocab size.
inline int64_t add_spm_test_vocabulary(model::GgufWriter& w, const std::vector<std::string>& pieces) {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (const std::string& p : pieces) {
    tokens.push_back(p);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  return static_cast<int64_t>(tokens.size());
}

// The pieces gguf tests use after the byte tokens: "▁", a, b, c and a few merges.
inline const std::vector<std::string>& abc_pieces() {
  static const std::vector<std::string> p{"\xE2\x96\x81", "a", "b", "c", "ab", "\xE2\x96\x81" "ab", "ca", "bc", "cab"};
  return p;
}

// The values the file stores for `values` in `type`, decoded by the test's own definitions.
inline DVec ref_stored(model::GgmlType type, const std::vector<float>& values) {
  const std::vector<uint8_t> b = model::encode_ggml(type, values);
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<float> f;
  switch (type) {
    case model::GgmlType::Q8_0: f = ref_dequant_q8_0(b.data(), n); break;
    case model::GgmlType::Q4_0: f = ref_dequant_q4_0(b.data(), n); break;
    case model::GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) f.push_back(ref_f16(ref_u16(b.data() + 2 * i)));
      break;
    case model::GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) f.push_back(ref_bf16(ref_u16(b.data() + 2 * i)));
      break;
    default: f = values;
  }
  return DVec(f.begin(), f.end());
}

// Writes a random-weight LLaMA GGUF to path; returns its reference with the stored values.
inline RefLlama write_tiny_llama(const TinyLlamaSpec& s, const std::string& path) {
  std::mt19937 rng(s.seed);
  auto random = [&](int64_t n, double scale, double offset = 0.0) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(offset + scale * u(rng));
    return v;
  };
  RefLlama m;
  m.V = s.vocab, m.D = s.dim, m.L = s.layers, m.F = s.ffn, m.H = s.heads, m.KV = s.kv_heads;
  m.hd = s.dim / s.heads, m.E = s.experts, m.K = s.top_k, m.theta = s.theta, m.eps = 1e-5;
  const bool qwen = s.arch != model::LlamaArch::Llama, shared = s.arch == model::LlamaArch::Qwen2Moe;
  m.neox = qwen;
  m.renormalize = !qwen;
  model::GgufWriter w;
  model::LlamaConfig c;
  c.arch = s.arch;
  c.shared_ffn_dim = shared ? s.shared_ffn : 0;
  c.vocab_size = s.vocab, c.dim = s.dim, c.layers = s.layers, c.ffn_dim = s.ffn, c.heads = s.heads;
  c.kv_heads = s.kv_heads, c.head_dim = m.hd, c.context_length = s.context, c.rope_base = s.theta;
  c.experts = s.experts, c.experts_used = s.top_k;
  model::write_llama_config(c, "troupe-test-tiny-llama", w);
  auto put = [&](const std::string& name, model::GgmlType type, std::vector<int64_t> ne,
                 const std::vector<float>& v) {
    if (name != s.drop_tensor) w.add_tensor(name, type, std::move(ne), v);
  };
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  if (s.more_metadata) s.more_metadata(w);
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, int64_t planes = 1) {
    const std::vector<float> v = random(rows * cols * planes, 1.0 / std::sqrt(double(cols)));
    std::vector<int64_t> ne{cols, rows};
    if (planes > 1 || name.find("_exps") != std::string::npos) ne.push_back(planes);
    put(name, s.type, ne, v);
    const DVec stored = ref_stored(s.type, v);
    const bool q8 = s.type == model::GgmlType::Q8_0 || s.type == model::GgmlType::Q4_0;
    std::vector<RefMatrix> out;
    for (int64_t p = 0; p < planes; ++p)
      out.push_back({rows, cols, DVec(stored.begin() + p * rows * cols, stored.begin() + (p + 1) * rows * cols), q8});
    return out;
  };
  auto norm = [&](const std::string& name) {
    const std::vector<float> v = random(s.dim, 0.5, 1.0);
    put(name, model::GgmlType::F32, {s.dim}, v);
    return DVec(v.begin(), v.end());
  };
  auto f32_vector = [&](const std::string& name, int64_t n, double scale) {  // a bias, a gate row
    const std::vector<float> v = random(n, scale);
    put(name, model::GgmlType::F32, {n}, v);
    return DVec(v.begin(), v.end());
  };
  m.embd = matrix("token_embd.weight", s.vocab, s.dim)[0];
  m.output_norm = norm("output_norm.weight");
  m.output = s.tied ? m.embd : matrix("output.weight", s.vocab, s.dim)[0];
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    RefLayer L;
    L.attn_norm = norm(p + "attn_norm.weight");
    L.wq = matrix(p + "attn_q.weight", s.heads * m.hd, s.dim)[0];
    L.wk = matrix(p + "attn_k.weight", s.kv_heads * m.hd, s.dim)[0];
    L.wv = matrix(p + "attn_v.weight", s.kv_heads * m.hd, s.dim)[0];
    L.wo = matrix(p + "attn_output.weight", s.dim, s.heads * m.hd)[0];
    if (qwen) {  // biases of about a projection's size, so a wrong add shows
      L.bq = f32_vector(p + "attn_q.bias", s.heads * m.hd, 0.5);
      L.bk = f32_vector(p + "attn_k.bias", s.kv_heads * m.hd, 0.5);
      L.bv = f32_vector(p + "attn_v.bias", s.kv_heads * m.hd, 0.5);
    }
    L.ffn_norm = norm(p + "ffn_norm.weight");
    if (s.experts == 0) {
      L.gate = matrix(p + "ffn_gate.weight", s.ffn, s.dim);
      L.up = matrix(p + "ffn_up.weight", s.ffn, s.dim);
      L.down = matrix(p + "ffn_down.weight", s.dim, s.ffn);
    } else {
      // The router in F32 (as llama.cpp's converters keep it) and scaled so routing is decisive.
      const std::vector<float> r = random(s.experts * s.dim, 4.0 / std::sqrt(double(s.dim)));
      put(p + "ffn_gate_inp.weight", model::GgmlType::F32, {s.dim, s.experts}, r);
      L.router = {s.experts, s.dim, DVec(r.begin(), r.end())};
      L.gate = matrix(p + "ffn_gate_exps.weight", s.ffn, s.dim, s.experts);
      L.up = matrix(p + "ffn_up_exps.weight", s.ffn, s.dim, s.experts);
      L.down = matrix(p + "ffn_down_exps.weight", s.dim, s.ffn, s.experts);
    }
    if (shared) {  // the gate's logits around ±2: sigmoids well away from 0 and 1
      L.sh_gate_inp = f32_vector(p + "ffn_gate_inp_shexp.weight", s.dim, 4.0 / std::sqrt(double(s.dim)));
      L.sh_gate = matrix(p + "ffn_gate_shexp.weight", s.shared_ffn, s.dim)[0];
      L.sh_up = matrix(p + "ffn_up_shexp.weight", s.shared_ffn, s.dim)[0];
      L.sh_down = matrix(p + "ffn_down_shexp.weight", s.dim, s.shared_ffn)[0];
    }
    m.layers.push_back(std::move(L));
  }
  w.write(path);
  return m;
}

}  // namespace troupe::testing
