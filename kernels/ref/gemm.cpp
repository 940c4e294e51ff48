// ref::gemm: the definition the fast paths are tested against. Each weight row is
// dequantized exactly (dequantize_rows) and dotted with each activation row in plain
// f32, k ascending. GemmPrecision::Bf16 first rounds the activations to bf16.
#include "kernels/gemm.h"

#include <cstddef>
#include <vector>

#include "kernels/quant.h"

namespace troupe::kernels::ref {

void gemm(const GemmParams& p) {
  if (q8_activations(p)) return gemm_q8(p);
  const int64_t m_rows = p.m, n_cols = p.w.rows, k_len = p.w.cols;
  const int64_t ldx = p.ldx ? p.ldx : k_len, ldy = p.ldy ? p.ldy : n_cols;
  std::vector<float> x(static_cast<size_t>(m_rows * k_len));
  for (int64_t m = 0; m < m_rows; ++m)
    for (int64_t k = 0; k < k_len; ++k) {
      const float v = p.x[m * ldx + k];
      x[m * k_len + k] = p.precision == GemmPrecision::Bf16 ? bf16_decode(bf16_encode(v)) : v;
    }
  std::vector<float> w(static_cast<size_t>(k_len));
  for (int64_t n = 0; n < n_cols; ++n) {
    dequantize_rows(p.w, n, 1, w.data());
    for (int64_t m = 0; m < m_rows; ++m) {
      float s = 0;
      for (int64_t k = 0; k < k_len; ++k) s += x[m * k_len + k] * w[k];
      float& y = p.y[m * ldy + n];
      y = p.accumulate ? y + s : s;
    }
  }
}

}  // namespace troupe::kernels::ref
