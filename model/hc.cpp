#include "model/hc.h"

#include <cmath>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "model/op_profile.h"

namespace troupe::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// 1 / sqrt(mean(x²) + eps) over a flattened residual (hc·H values), summed in double. The
// sum runs as kLanes independent partial sums added in a fixed order at the end: one
// chain of hc·H dependent adds (8192 on v41-small) was ~9 us a row, latency-bound, and
// HCMix and HCHead take one per row per call (~30 calls per token).
float inv_rms(const float* x, int64_t n, double eps) {
  constexpr int64_t kLanes = 16;
  double part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (int64_t j = 0; i < n; ++i, ++j) part[j] += static_cast<double>(x[i]) * x[i];
  double ss = 0;
  for (double v : part) ss += v;
  return static_cast<float>(1.0 / std::sqrt(ss / n + eps));
}

// m[rows, n_out] = (fn · flat(X)) / sqrt(mean(flat(X)²) + eps)
scratch_vector<float> normalized_projection(const ModelConfig& c, const kernels::WeightView& fn,
                                         const float* X, int64_t rows) {
  const int64_t width = c.hc_mult * c.hidden_size;
  scratch_vector<float> m(rows * fn.rows);
  kernels::GemmParams g;
  g.x = X;
  g.w = fn;
  g.y = m.data();
  g.m = rows;
  kernels::gemm(g);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = inv_rms(X + r * width, width, c.rms_norm_eps);
    for (int64_t i = 0; i < fn.rows; ++i) m[r * fn.rows + i] *= s;
  }
  return m;
}

// comb (hc x hc, row-major C[i][j]) <- Sinkhorn normalisation of the logits, §5.2.
void sinkhorn(float* C, int64_t hc, int64_t iters, float eps) {
  for (int64_t i = 0; i < hc; ++i) {
    float mx = C[i * hc];
    for (int64_t j = 1; j < hc; ++j) mx = std::max(mx, C[i * hc + j]);
    float sum = 0;
    for (int64_t j = 0; j < hc; ++j) sum += (C[i * hc + j] = std::exp(C[i * hc + j] - mx));
    for (int64_t j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / sum + eps;
  }
  auto normalize_cols = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float sum = 0;
      for (int64_t i = 0; i < hc; ++i) sum += C[i * hc + j];
      for (int64_t i = 0; i < hc; ++i) C[i * hc + j] /= sum + eps;
    }
  };
  normalize_cols();
  for (int64_t it = 1; it < iters; ++it) {
    for (int64_t i = 0; i < hc; ++i) {
      float sum = 0;
      for (int64_t j = 0; j < hc; ++j) sum += C[i * hc + j];
      for (int64_t j = 0; j < hc; ++j) C[i * hc + j] /= sum + eps;
    }
    normalize_cols();
  }
}

}  // namespace

HcMix hc_mix(const ModelConfig& c, const HcMixWeights& w, const float* X, int64_t rows) {
  const int64_t hc = c.hc_mult, n = (2 + hc) * hc;
  const float eps = static_cast<float>(c.hc_eps);
  ScopedOp op(Op::HcMix);
  scratch_vector<float> m = normalized_projection(c, w.fn, X, rows);
  HcMix mix;
  mix.pre.resize(rows * hc);
  mix.post.resize(rows * hc);
  mix.comb.resize(rows * hc * hc);
  for (int64_t r = 0; r < rows; ++r) {
    const float* mr = &m[r * n];
    float lg[64];
    for (int64_t i = 0; i < n; ++i) {
      const float s = i < hc ? w.scale[0] : i < 2 * hc ? w.scale[1] : w.scale[2];
      lg[i] = w.base[i] + mr[i] * s;
    }
    for (int64_t s = 0; s < hc; ++s) {
      mix.pre[r * hc + s] = sigmoid(lg[s]) + eps;
      mix.post[r * hc + s] = 2.0f * sigmoid(lg[hc + s]);
    }
    float* C = &mix.comb[r * hc * hc];
    for (int64_t i = 0; i < hc * hc; ++i) C[i] = lg[2 * hc + i];
    sinkhorn(C, hc, c.hc_sinkhorn_iters, eps);
  }
  return mix;
}

void hc_premix(const ModelConfig& c, const float* X, const float* pre, int64_t rows, float* out) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  ScopedOp op(Op::HcApply);
  kernels::parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * H;
      const float* x = X + r * hc * H;
      for (int64_t k = 0; k < H; ++k) o[k] = pre[r * hc] * x[k];
      for (int64_t s = 1; s < hc; ++s)
        for (int64_t k = 0; k < H; ++k) o[k] += pre[r * hc + s] * x[s * H + k];
    }
  });
}

void hc_expand(const ModelConfig& c, const float* y, const HcMix& mix, int64_t rows, float* X) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  ScopedOp op(Op::HcApply);
  kernels::parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    scratch_vector<float> out(hc * H);
    for (int64_t r = r0; r < r1; ++r) {
      float* x = X + r * hc * H;
      const float* C = &mix.comb[r * hc * hc];
      for (int64_t j = 0; j < hc; ++j) {
        float* o = &out[j * H];
        const float post = mix.post[r * hc + j];
        for (int64_t k = 0; k < H; ++k) o[k] = post * y[r * H + k];
        for (int64_t i = 0; i < hc; ++i)
          for (int64_t k = 0; k < H; ++k) o[k] += C[i * hc + j] * x[i * H + k];
      }
      std::copy(out.begin(), out.end(), x);
    }
  });
}

void hc_head(const ModelConfig& c, const ModelWeights& w, const float* X, int64_t rows, float* h) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  scratch_vector<float> m = normalized_projection(c, w.hc_head_fn, X, rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = h + r * H;
    for (int64_t k = 0; k < H; ++k) o[k] = 0;
    for (int64_t s = 0; s < hc; ++s) {
      const float ws =
          sigmoid(m[r * hc + s] * w.hc_head_scale + w.hc_head_base[s]) + static_cast<float>(c.hc_eps);
      for (int64_t k = 0; k < H; ++k) o[k] += ws * X[r * hc * H + s * H + k];
    }
  }
}

}  // namespace troupe::model
