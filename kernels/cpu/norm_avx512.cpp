// AVX-512 row kernels for RMSNorm and softmax (selected by cpu::rms_norm /
// cpu::softmax only when cpu_features().has_avx512()).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/norm_rows.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;

float sum_of_squares(const float* x, int64_t n) {
  // Four accumulators hide the FMA latency; the masked tail joins the first.
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      acc[j] = _mm512_fmadd_ps(v, v, acc[j]);
    }
  for (; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(first_lanes(std::min<int64_t>(16, n - i)), x + i);
    acc[0] = _mm512_fmadd_ps(v, v, acc[0]);
  }
  return avx512::hsum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

void rms_norm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
  const __m512 vinv = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - i));
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv);
    if (w) v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), v);
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void softmax_row(float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - i));
    vmax = _mm512_max_ps(_mm512_mask_loadu_ps(neg_inf, m, x + i), vmax);  // NaN lanes kept out
  }
  const float max = avx512::hmax(vmax);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;  // all masked: no mass anywhere
    return;
  }
  const __m512 shift = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - i));
    const __m512 e = avx512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), shift));
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / avx512::hsum(vsum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first_lanes(std::min<int64_t>(16, n - i));
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

}  // namespace

const NormRowKernels& avx512_norm_kernels() {
  static const NormRowKernels k{rms_norm_row, softmax_row};
  return k;
}

}  // namespace troupe::kernels::cpu
