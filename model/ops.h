// Thin model-side wrappers over the kernel entry points, so the layer code reads
// as math: linear(x -> y), rms_norm rows, rope rows.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/check.h"
#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "kernels/norm.h"
#include "kernels/rope.h"

namespace troupe::model {

using kernels::scratch_vector;

// y[rows, w.rows] = x[rows, w.cols] · wᵀ (strides default to dense).
inline void linear(const float* x, int64_t rows, const kernels::WeightView& w, float* y,
                   int64_t ldx = 0, int64_t ldy = 0) {
  kernels::GemmParams g;
  g.x = x;
  g.w = w;
  g.y = y;
  g.m = rows;
  g.ldx = ldx;
  g.ldy = ldy;
  kernels::gemm(g);
}

// y_i[rows, w_i.rows] = x · w_iᵀ for up to four weights over the same x, as linear()
// gives each; one kernels::gemm_shared_x call (x quantized once for q8_0 / q4_0 weights).
struct LinearOut {
  kernels::WeightView w;
  float* y;
};
inline void linear_shared_x(const float* x, int64_t rows, std::initializer_list<LinearOut> outs) {
  std::array<kernels::GemmParams, 4> ps;
  TROUPE_CHECK(outs.size() <= ps.size(), "linear_shared_x: at most ", ps.size(), " weights");
  size_t n = 0;
  for (const LinearOut& o : outs) {
    ps[n].x = x;
    ps[n].w = o.w;
    ps[n].y = o.y;
    ps[n++].m = rows;
  }
  kernels::gemm_shared_x({ps.data(), n});
}

inline kernels::scratch_vector<float> linear(const float* x, int64_t rows,
                                            const kernels::WeightView& w) {
  kernels::scratch_vector<float> y(rows * w.rows);
  linear(x, rows, w, y.data());
  return y;
}

// out[rows, n] <- weight ⊙ x / rms(x); out may be x (in place).
inline void rms_norm_rows(const float* x, float* out, int64_t rows, int64_t n,
                          const std::vector<float>& weight, double eps) {
  kernels::RmsNormParams p;
  p.x = x;
  p.out = out;
  p.weight = weight.empty() ? nullptr : weight.data();
  p.rows = rows;
  p.n = n;
  p.eps = static_cast<float>(eps);
  kernels::rms_norm(p);
}

// In place: x[rows, n] <- weight ⊙ x / rms(x)
inline void rms_norm_rows(float* x, int64_t rows, int64_t n, const std::vector<float>& weight,
                          double eps) {
  rms_norm_rows(x, x, rows, n, weight, eps);
}

// In place rope of `count` vectors of n channels; every `per_position` consecutive
// vectors share positions[i].
inline void rope_rows(float* x, int64_t count, int64_t n, int64_t rope_dim,
                      const int64_t* positions, int64_t per_position,
                      const std::vector<double>& freqs, bool inverse = false,
                      bool neox = false) {
  kernels::RopeParams p;
  p.x = x;
  p.count = count;
  p.n = n;
  p.rope_dim = rope_dim;
  p.positions = positions;
  p.per_position = per_position;
  p.freqs = freqs.data();
  p.inverse = inverse;
  p.neox = neox;
  kernels::rope(p);
}

}  // namespace troupe::model
