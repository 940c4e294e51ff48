// Plain, slow reference math for the model-block tests (tests/model/blocks_*_test.cpp),
// written from MODEL.md rather than from the engine: double accumulation over weights
// dequantized exactly (kernels::dequantize_rows, §3), RMSNorm, RoPE with YaRN (§5),
// the §3 activation quantizers rebuilt from the independent grid search of
// tests/kernels/quant_ref.h, and MODEL.md's rank order. Plus the small test plumbing
// the block tests share: seeded inputs, a Batch builder, comparisons.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/quant_ref.h"
#include "kernels/weights.h"
#include "model/batch.h"
#include "model/config.h"
#include "tests/support/random_normal.h"

namespace troupe::testing::ref {

using DVec = std::vector<double>;

// A stored weight dequantized to f32 [rows, cols] (exact for every §2 format).
struct Dense {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
  const float* row(int64_t r) const { return &w[r * cols]; }
};

inline Dense dense(const kernels::WeightView& v) {
  Dense d{v.rows, v.cols, std::vector<float>(v.rows * v.cols)};
  if (v.rows > 0) kernels::dequantize_rows(v, 0, v.rows, d.w.data());
  return d;
}

// y = W·x over rows [r0, r0 + n) of W (all rows by default), double accumulation.
template <class T>
DVec matvec(const Dense& W, const T* x, int64_t r0 = 0, int64_t n = -1) {
  if (n < 0) n = W.rows - r0;
  DVec y(n);
  for (int64_t r = 0; r < n; ++r) {
    const float* w = W.row(r0 + r);
    double acc = 0;
    for (int64_t c = 0; c < W.cols; ++c) acc += static_cast<double>(w[c]) * x[c];
    y[r] = acc;
  }
  return y;
}

inline double mean_square(const DVec& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  return ss / static_cast<double>(x.size());
}

// RMSNorm(x, w) = w ⊙ x / sqrt(mean(x²) + eps)   (§5)
inline DVec rms_norm(const DVec& x, const std::vector<float>& w, double eps) {
  const double inv = 1.0 / std::sqrt(mean_square(x) + eps);
  DVec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

inline DVec to_double(const float* x, int64_t n) {
  return DVec(x, x + n);
}

// f_i of §5 for i < Dr/2, with the YaRN blend when factor != 1.
inline DVec rope_freqs(double theta, int64_t Dr, const kernels::YarnScaling& y) {
  DVec f(Dr / 2);
  for (int64_t i = 0; i < Dr / 2; ++i) f[i] = std::pow(theta, -2.0 * i / Dr);
  if (y.factor == 1.0) return f;
  const double two_pi = 2.0 * M_PI, orig = y.original_max_position;
  const double low = std::max(
      std::floor(Dr * std::log(orig / (y.beta_fast * two_pi)) / (2 * std::log(theta))), 0.0);
  const double high =
      std::min(std::ceil(Dr * std::log(orig / (y.beta_slow * two_pi)) / (2 * std::log(theta))),
               static_cast<double>(Dr - 1));
  for (int64_t i = 0; i < Dr / 2; ++i) {
    const double ramp = std::clamp((i - low) / std::max(high - low, 1e-3), 0.0, 1.0);
    f[i] = f[i] / y.factor * ramp + f[i] * (1 - ramp);
  }
  return f;
}

// θ of a layer: ratio 0 -> rope_theta, no YaRN; ratio > 0 -> compress_rope_theta + YaRN.
inline DVec layer_freqs(const model::ModelConfig& c, int64_t layer) {
  if (c.ratio(layer) == 0) return rope_freqs(c.rope_theta, c.qk_rope_head_dim, {});
  return rope_freqs(c.compress_rope_theta, c.qk_rope_head_dim, c.rope_scaling);
}

// rope / inverse_rope of §5 on the last Dr channels of v, in place (cos, sin rounded
// to f32 as the spec says; the products kept in double).
inline void rope(DVec& v, int64_t Dr, int64_t p, const DVec& f, bool inverse = false) {
  const size_t b = v.size() - Dr;
  for (int64_t i = 0; i < Dr / 2; ++i) {
    const double phi = (inverse ? -1.0 : 1.0) * static_cast<double>(p) * f[i];
    const double c = static_cast<float>(std::cos(phi)), s = static_cast<float>(std::sin(phi));
    const double a = v[b + 2 * i], z = v[b + 2 * i + 1];
    v[b + 2 * i] = a * c - z * s;
    v[b + 2 * i + 1] = a * s + z * c;
  }
}

// --- §3 activation / cache quantizers (input rounded to f32, f32 divisions) ----------
enum class Quant { Fp8Ue8m0, Nvfp4, Mxfp4 };

inline float e4m3_value(uint8_t code) {
  const double m = kernels::quant_ref::ref_e4m3_magnitude(code & 0x7F);
  return static_cast<float>(code & 0x80 ? -m : m);
}

inline float e2m1_value(uint8_t code) {
  const double m = kernels::quant_ref::ref_e2m1_magnitude(code & 7);
  return static_cast<float>(code & 8 ? -m : m);
}

// The scale s of one block from its amax (f32), per quantizer.
inline float block_scale(Quant q, float amax) {
  using namespace kernels::quant_ref;
  switch (q) {
    case Quant::Fp8Ue8m0:
      return ref_scale(ref_pow2ceil_code(std::max(amax, 1e-4f) / 448.0f));
    case Quant::Nvfp4:
      return e4m3_value(ref_e4m3(std::max(amax, std::ldexp(6.0f, -9)) / 6.0f));
    case Quant::Mxfp4:
      return ref_scale(ref_pow2ceil_code(std::max(amax, std::ldexp(6.0f, -126)) / 6.0f));
  }
  return 0;
}

// A quantized row as the reference sees it: the dequantized values, and per element
// whether an f32 evaluation of the same math may round it the other way. The engine
// rounds f32 values computed in another order than this double reference, so an
// element whose value lies within δ·amax of a rounding midpoint (or whose block amax
// lies within a relative δ of a scale boundary) may legitimately land on the
// neighbouring grid point. δ = 1e-5 is far above f32 accumulation error here and far
// below any real mistake.
struct QuantRow {
  DVec v;
  std::vector<char> ambiguous;
  bool any_ambiguous() const { return std::count(ambiguous.begin(), ambiguous.end(), 1) > 0; }
};

inline float quant_value(Quant q, float x, float s) {
  using namespace kernels::quant_ref;
  const float qmax = q == Quant::Fp8Ue8m0 ? 448.0f : 6.0f;
  const float t = std::clamp(x / s, -qmax, qmax);
  return (q == Quant::Fp8Ue8m0 ? e4m3_value(ref_e4m3(t)) : e2m1_value(ref_e2m1(t))) * s;
}

// x -> quantize -> dequantize (the model's f32 view of a stored row), with ambiguity.
inline QuantRow quantize_row(const DVec& x, Quant q, double delta = 1e-5) {
  const size_t block = q == Quant::Nvfp4 ? 16 : 32;
  QuantRow out{DVec(x.size()), std::vector<char>(x.size(), 0)};
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    float amax = 0;
    for (size_t i = b0; i < b0 + block; ++i) amax = std::max(amax, std::fabs(float(x[i])));
    const float s = block_scale(q, amax), d = static_cast<float>(delta * amax);
    const bool scale_edge =
        block_scale(q, amax * float(1 - delta)) != block_scale(q, amax * float(1 + delta));
    for (size_t i = b0; i < b0 + block; ++i) {
      const float xi = static_cast<float>(x[i]);
      out.v[i] = quant_value(q, xi, s);
      out.ambiguous[i] = scale_edge || quant_value(q, xi - d, s) != quant_value(q, xi + d, s);
    }
  }
  return out;
}

inline DVec fake_quant(const DVec& x, Quant q) {
  return quantize_row(x, q).v;
}

// Elements where the engine's decoded row differs from the reference at a value the
// reference did not flag as ambiguous: real differences.
inline int64_t real_mismatches(const float* got, const QuantRow& want) {
  int64_t n = 0;
  for (size_t i = 0; i < want.v.size(); ++i)
    n += static_cast<double>(got[i]) != want.v[i] && !want.ambiguous[i];
  return n;
}

// rank(list) of §5.4/§5.5: indices by value descending, equal values -> lower index first.
inline std::vector<int64_t> rank_desc(const DVec& v) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
  return idx;
}

// --- test plumbing ------------------------------------------------------------------
inline std::vector<float> random_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
  return testing_support::random_normal(n, seed, stddev);
}

inline double rel_l2(const DVec& got, const DVec& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double rel_l2(const float* got, const DVec& want) {
  return rel_l2(to_double(got, static_cast<int64_t>(want.size())), want);
}

// One chunk of new tokens per sequence, positions from each state's length(); the
// row layout of model::Forward's make_batch (model/batch.h).
struct SeqChunk {
  model::KvStore* state;
  std::vector<int32_t> tokens;
};

inline model::Batch make_batch(const std::vector<SeqChunk>& chunks) {
  model::Batch b;
  b.begin.push_back(0);
  for (const SeqChunk& ch : chunks) {
    const int32_t s = static_cast<int32_t>(b.states.size());
    b.states.push_back(ch.state);
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      b.seq.push_back(s);
      b.pos.push_back(ch.state->length() + static_cast<int64_t>(i));
      b.token.push_back(ch.tokens[i]);
    }
    b.begin.push_back(static_cast<int64_t>(b.pos.size()));
  }
  b.rows = static_cast<int64_t>(b.pos.size());
  return b;
}

inline std::vector<int32_t> token_run(int64_t n, int32_t first) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(5 + (first + 37 * i) % 4000);
  return t;
}

}  // namespace troupe::testing::ref
