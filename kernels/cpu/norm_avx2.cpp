// AVX2 row kernels for RMSNorm and softmax (norm_avx512.cpp's on 8-lane vectors; selected
// by cpu::rms_norm / cpu::softmax on the AVX2 path).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/norm_rows.h"

namespace troupe::kernels::cpu {
namespace {

using avx2::first_lanes;

inline __m256i lanes_left(int64_t i, int64_t n) {
  return first_lanes(std::min<int64_t>(8, n - i));
}

float sum_of_squares(const float* x, int64_t n) {
  // Four accumulators hide the FMA latency; the masked tail joins the first.
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
      acc[j] = _mm256_fmadd_ps(v, v, acc[j]);
    }
  for (; i < n; i += 8) {
    const __m256 v = _mm256_maskload_ps(x + i, lanes_left(i, n));
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  return avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void rms_norm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = lanes_left(i, n);
    __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vinv);
    if (w) v = _mm256_mul_ps(_mm256_maskload_ps(w + i, m), v);
    _mm256_maskstore_ps(out + i, m, v);
  }
}

void softmax_row(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = lanes_left(i, n);
    const __m256 v = _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m));
    vmax = _mm256_max_ps(v, vmax);  // NaN lanes kept out (max returns its second operand)
  }
  const float max = avx2::hmax(vmax);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;  // all masked: no mass anywhere
    return;
  }
  const __m256 shift = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = lanes_left(i, n);
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), shift));
    _mm256_maskstore_ps(x + i, m, e);
    vsum = _mm256_add_ps(vsum, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
  }
  const __m256 inv = _mm256_set1_ps(1.0f / avx2::hsum(vsum));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = lanes_left(i, n);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

}  // namespace

const NormRowKernels& avx2_norm_kernels() {
  static const NormRowKernels k{rms_norm_row, softmax_row};
  return k;
}

}  // namespace troupe::kernels::cpu
